package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// pidsFile is the state file naming the processes a sandbox started, the
// supervisor first, one a line: `PID start=TICKS boot=BOOT_ID exe="PATH"`.
const pidsFile = "pids"

// procRecord identifies one process the sandbox started. A pid alone does
// not: once the process ends the kernel hands the number to another. The
// pid, the boot, the start time and the executable together do, so `down`
// signals a pid only while all four still match.
type procRecord struct {
	pid int
	// start is the process's start time in clock ticks since boot
	// (/proc/<pid>/stat field 22).
	start uint64
	// boot is the kernel's boot id (/proc/sys/kernel/random/boot_id): start
	// times restart from zero at each boot.
	boot string
	// exe is the executable's path (/proc/<pid>/exe).
	exe string
}

func (r procRecord) String() string {
	return fmt.Sprintf("%d start=%d boot=%s exe=%s", r.pid, r.start, r.boot, strconv.Quote(r.exe))
}

// procStatus is what /proc says about a recorded process now.
type procStatus int

const (
	// procGone: no process has the pid, or only a zombie.
	procGone procStatus = iota
	// procOurs: the pid is the recorded process, still running.
	procOurs
	// procForeign: the pid is running but is not provably the recorded
	// process (pid recycled, another boot, another executable, or /proc
	// does not tell).
	procForeign
)

// procInfo is what /proc says about a running pid.
type procInfo struct {
	procRecord
	// state is /proc/<pid>/stat field 3 (R, S, D, Z, ...).
	state byte
	// pgrp is the process group id (field 5).
	pgrp int
}

// identify reads a pid's identity from /proc; fs.ErrNotExist when no
// process has it.
func identify(pid int) (procInfo, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return procInfo{}, fs.ErrNotExist
		}
		return procInfo{}, err
	}
	info := procInfo{procRecord: procRecord{pid: pid}}
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses itself: the fields that follow start after the last ')'.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 20 {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want at least 20", pid, len(fields))
	}
	info.state = fields[0][0]
	if info.pgrp, err = strconv.Atoi(fields[2]); err != nil {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: process group %q: %w", pid, fields[2], err)
	}
	if info.start, err = strconv.ParseUint(fields[19], 10, 64); err != nil {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: start time %q: %w", pid, fields[19], err)
	}
	if info.state == 'Z' || info.state == 'X' {
		return info, nil // a zombie has no executable left to read
	}
	if info.boot, err = bootID(); err != nil {
		return procInfo{}, err
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return procInfo{}, fs.ErrNotExist
		}
		return procInfo{}, fmt.Errorf("reading the executable of pid %d: %w", pid, err)
	}
	// A binary replaced on disk (`make sandbox-down` rebuilds bin/sandbox)
	// shows as "PATH (deleted)": the process is the same.
	info.exe = strings.TrimSuffix(exe, " (deleted)")
	return info, nil
}

func bootID() (string, error) {
	raw, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("reading the boot id: %w", err)
	}
	return strings.TrimSpace(string(raw)), nil
}

// check reports whether the recorded process is still running, and why a
// running pid is not it.
func check(rec procRecord) (procStatus, procInfo, string) {
	info, err := identify(rec.pid)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return procGone, info, ""
	case err != nil:
		return procForeign, info, err.Error()
	case info.state == 'Z' || info.state == 'X':
		if info.start == rec.start {
			return procGone, info, ""
		}
		return procForeign, info, "a zombie of another process"
	case info.boot != rec.boot:
		return procForeign, info, "the machine rebooted since"
	case info.start != rec.start:
		return procForeign, info, fmt.Sprintf("it started at tick %d, not %d", info.start, rec.start)
	case info.exe != rec.exe:
		return procForeign, info, fmt.Sprintf("it runs %s, not %s", info.exe, rec.exe)
	}
	return procOurs, info, ""
}

// errNotOurs: the pid no longer is the recorded process.
var errNotOurs = errors.New("the pid is no longer the sandbox's process")

// signalVerified sends sig to the recorded process, or to its process group when
// group is set and the process leads one, after proving the pid is still
// that process. The process is held (a pidfd, on Linux) before it is
// checked, so the signal cannot reach a process that took the pid after
// the check.
func signalVerified(rec procRecord, sig syscall.Signal, group bool) error {
	p, err := os.FindProcess(rec.pid)
	if err != nil {
		return err
	}
	defer func() { _ = p.Release() }()
	status, info, _ := check(rec)
	if status != procOurs {
		return errNotOurs
	}
	if group && info.pgrp == rec.pid {
		// The verified process leads the group, so the group is the
		// sandbox's: whatever it forked goes too.
		err = syscall.Kill(-rec.pid, sig)
	} else {
		err = p.Signal(sig)
	}
	if errors.Is(err, os.ErrProcessDone) || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("signalling pid %d: %w", rec.pid, err)
	}
	return nil
}

// record identifies a running pid for the pids file.
func record(pid int) (procRecord, error) {
	info, err := identify(pid)
	if err != nil {
		return procRecord{}, fmt.Errorf("identifying pid %d: %w", pid, err)
	}
	if info.state == 'Z' || info.state == 'X' {
		return procRecord{}, fmt.Errorf("identifying pid %d: it has exited", pid)
	}
	return info.procRecord, nil
}

// writeRecords replaces the pids file in one step: a reader sees the old
// list or the new one, never half of one.
func writeRecords(dir string, recs []procRecord) error {
	var b strings.Builder
	for _, r := range recs {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	path := filepath.Join(dir, pidsFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// readRecords reads the pids file; no file is no records.
func readRecords(dir string) ([]procRecord, error) {
	path := filepath.Join(dir, pidsFile)
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseRecords(path, raw)
}

// parseRecords parses a pids file; source names it in errors.
func parseRecords(source string, data []byte) ([]procRecord, error) {
	var out []procRecord
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		rec, err := parseRecord(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", source, n, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return out, nil
}

func parseRecord(line string) (procRecord, error) {
	parts := strings.SplitN(line, " ", 4)
	if len(parts) != 4 {
		return procRecord{}, fmt.Errorf("%q: want `PID start=TICKS boot=ID exe=\"PATH\"` (a sandbox started by an older version records no start time: stop its processes yourself)", line)
	}
	var rec procRecord
	var err error
	if rec.pid, err = strconv.Atoi(parts[0]); err != nil || rec.pid <= 0 {
		return procRecord{}, fmt.Errorf("pid %q: want a positive integer", parts[0])
	}
	start, ok := strings.CutPrefix(parts[1], "start=")
	if !ok {
		return procRecord{}, fmt.Errorf("%q: want start=TICKS", parts[1])
	}
	if rec.start, err = strconv.ParseUint(start, 10, 64); err != nil {
		return procRecord{}, fmt.Errorf("start %q: want an integer", start)
	}
	if rec.boot, ok = strings.CutPrefix(parts[2], "boot="); !ok || rec.boot == "" {
		return procRecord{}, fmt.Errorf("%q: want boot=ID", parts[2])
	}
	exe, ok := strings.CutPrefix(parts[3], "exe=")
	if !ok {
		return procRecord{}, fmt.Errorf("%q: want exe=\"PATH\"", parts[3])
	}
	if rec.exe, err = strconv.Unquote(exe); err != nil || rec.exe == "" {
		return procRecord{}, fmt.Errorf("exe %s: want a quoted path", exe)
	}
	return rec, nil
}
