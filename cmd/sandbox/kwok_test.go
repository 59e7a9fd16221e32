package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKWOKMode(t *testing.T) {
	const bin = "/cache/kwok/v0.8.0/kwok"
	tests := []struct {
		name, flag, provider, bin string
		want, wantErr             string
	}{
		{name: "auto without a kwok binary keeps the builtin kubelet", flag: "auto", provider: "kwok", want: kwokBuiltin},
		{name: "auto with a kwok binary runs the real kwok", flag: "auto", provider: "kwok", bin: bin, want: kwokReal},
		{name: "auto on the fake AWS keeps its own kubelet", flag: "auto", provider: "aws", bin: bin, want: kwokBuiltin},
		{name: "builtin even with a kwok binary", flag: "builtin", provider: "kwok", bin: bin, want: kwokBuiltin},
		{name: "real with a kwok binary", flag: "real", provider: "kwok", bin: bin, want: kwokReal},
		{name: "real without a kwok binary says how to get one", flag: "real", provider: "kwok", wantErr: "hack/kwok.sh"},
		{name: "real on the fake AWS is refused", flag: "real", provider: "aws", bin: bin, wantErr: "--cloud-provider aws"},
		{name: "an unknown mode is refused", flag: "fake", provider: "kwok", wantErr: "want builtin, real or auto"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := kwokMode(tt.flag, tt.provider, tt.bin)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("kwokMode(%q, %q, %q) = %q, %v; want an error containing %q", tt.flag, tt.provider, tt.bin, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("kwokMode(%q, %q, %q) = %q, %v; want %q", tt.flag, tt.provider, tt.bin, got, err, tt.want)
			}
		})
	}
}

func TestCheckKWOKBinary(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "kwok")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "notes")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		ok         bool
	}{
		{"an executable file", exe, true},
		{"a missing file", filepath.Join(dir, "missing"), false},
		{"a directory", dir, false},
		{"a file that is not executable", plain, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := checkKWOKBinary(tt.path); (err == nil) != tt.ok {
				t.Fatalf("checkKWOKBinary(%s) = %v; want ok %v", tt.path, err, tt.ok)
			}
		})
	}
}
