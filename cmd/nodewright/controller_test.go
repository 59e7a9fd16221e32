package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Bad controller flags fail before anything connects, naming the flag.
func TestControllerRejectsBadFlags(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--cloud-provider", "gce"}, `--cloud-provider "gce"`},
		{[]string{"--min-values-policy", "Sometimes"}, `--min-values-policy "Sometimes"`},
		{[]string{"--batch-idle-duration", "20s", "--batch-max-duration", "10s"}, "--batch-idle-duration 20s and --batch-max-duration 10s"},
		{[]string{"--batch-idle-duration", "soon"}, `invalid argument "soon" for "--batch-idle-duration"`},
		{[]string{"--log-level", "loud"}, `--log-level "loud"`},
		{[]string{"--catalog", missing}, "--catalog"},
		{[]string{"--feature-gates", "Teleport=true"}, `unknown feature gate "Teleport"`},
		{[]string{"--feature-gates", "SpotToSpotConsolidation=maybe"}, `SpotToSpotConsolidation="maybe": want true or false`},
		{[]string{"--kubeconfig", missing}, "--kubeconfig"},
		{[]string{"--cloud-provider", "aws"}, "--cluster-name: required with --cloud-provider aws"},
		{[]string{"--cloud-provider", "aws", "--cluster-name", "demo", "--aws-endpoint", "http://203.0.113.7:4566"}, "only loopback endpoints"},
		{[]string{"--cloud-provider", "aws", "--cluster-name", "demo", "--aws-endpoint", "::"}, `--aws-endpoint "::": not a URL`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := run(t, append([]string{"controller"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseFeatureGates(t *testing.T) {
	for in, want := range map[string]bool{"": false, "SpotToSpotConsolidation=true": true, " SpotToSpotConsolidation=false ": false} {
		gates, err := parseFeatureGates(in)
		if err != nil || gates[gateSpotToSpot] != want {
			t.Errorf("parseFeatureGates(%q) = %v, %v: want SpotToSpotConsolidation %v", in, gates, err, want)
		}
	}
}
