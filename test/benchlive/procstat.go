package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports (the kernel exports that unit
// whatever its internal HZ).
const clockTicks = 100

// procUsage is what the kernel accounts for a process.
type procUsage struct {
	// peakRSS is VmHWM, the high-water mark of the resident set, in bytes.
	peakRSS int64
	// cpuSeconds is user plus system time.
	cpuSeconds float64
}

// readProcUsage reads /proc/<pid>/status and /proc/<pid>/stat.
func readProcUsage(pid int) (procUsage, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procUsage{}, fmt.Errorf("reading the status of pid %d: %w", pid, err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procUsage{}, fmt.Errorf("reading the stat of pid %d: %w", pid, err)
	}
	rss, err := parseVmHWM(string(status))
	if err != nil {
		return procUsage{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	cpu, err := parseCPUSeconds(string(stat))
	if err != nil {
		return procUsage{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	return procUsage{peakRSS: rss, cpuSeconds: cpu}, nil
}

// parseVmHWM returns the VmHWM line of /proc/<pid>/status in bytes.
func parseVmHWM(status string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("VmHWM %q: want <n> kB", strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmHWM %q: %w", fields[0], err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmHWM in /proc status")
}

// parseCPUSeconds returns utime+stime (fields 14 and 15) of
// /proc/<pid>/stat in seconds. The command name (field 2) may hold spaces
// and parentheses, so fields are counted from the last ')'.
func parseCPUSeconds(stat string) (float64, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc stat: no command name")
	}
	fields := strings.Fields(stat[end+1:])
	// fields[0] is field 3 (state), so field k is fields[k-3].
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command name, want at least 13", len(fields))
	}
	var ticks uint64
	for _, f := range fields[11:13] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: cpu time %q: %w", f, err)
		}
		ticks += v
	}
	return float64(ticks) / clockTicks, nil
}
