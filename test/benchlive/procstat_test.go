package main

import (
	"os"
	"testing"
)

func TestParseVmHWM(t *testing.T) {
	status := "Name:\tnodewright\nVmPeak:\t 2000000 kB\nVmHWM:\t  271360 kB\nVmRSS:\t  100000 kB\n"
	got, err := parseVmHWM(status)
	if err != nil {
		t.Fatal(err)
	}
	if got != 271360*1024 {
		t.Errorf("VmHWM = %d bytes, want %d", got, 271360*1024)
	}
	if _, err := parseVmHWM("Name:\tx\nVmRSS:\t 1 kB\n"); err == nil {
		t.Error("no error without a VmHWM line")
	}
}

// utime and stime are fields 14 and 15, counted after a command name that
// may itself hold spaces and parentheses.
func TestParseCPUSecondsCountsFieldsAfterTheCommandName(t *testing.T) {
	stat := "4242 (node wright) (x)) S 1 4242 4242 0 -1 4194560 5000 0 0 0 1234 566 0 0 20 0 12 0 777 1000000 2000 18446744073709551615"
	got, err := parseCPUSeconds(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 18.0 {
		t.Errorf("cpu = %vs, want 18s ((1234+566)/100)", got)
	}
	if _, err := parseCPUSeconds("4242 (short) S 1 2"); err == nil {
		t.Error("no error on a truncated stat")
	}
}

func TestReadProcUsageOfThisProcess(t *testing.T) {
	buf := make([]byte, 8<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	u, err := readProcUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.peakRSS < int64(len(buf)) {
		t.Errorf("peak RSS %d bytes, less than the %d this test touched", u.peakRSS, len(buf))
	}
	if u.cpuSeconds < 0 {
		t.Errorf("cpu %v", u.cpuSeconds)
	}
}
