package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// stopper stops a sandbox: SIGTERM to its supervisor, which stops the
// control plane and the controller in order; after grace, SIGKILL to the
// process group of each recorded process still running. Only processes
// proven to be the recorded ones are signalled (see procRecord).
type stopper struct {
	clock clock.Clock
	// grace is how long the processes have to exit after SIGTERM.
	grace time.Duration
	// poll is how often it looks whether they have.
	poll time.Duration
	out  io.Writer
}

// killWait is how long processes have to vanish after SIGKILL.
const killWait = 10 * time.Second

// down stops the sandbox whose state is in dir, then deletes dir.
func (s stopper) down(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintln(s.out, "no sandbox is running")
		return nil
	}
	if err := refuseSpecial(dir); err != nil {
		return err
	}
	if !isSandboxDir(dir) {
		return fmt.Errorf("--state %s: the directory has no %s file, so it is not a sandbox's state directory: not stopping the processes it names nor deleting it", dir, markerFile)
	}
	recs, err := readRecords(dir)
	if err != nil {
		return fmt.Errorf("--state %s: %w", dir, err)
	}
	ours := s.survey(dir, recs, true)
	if len(ours) == 0 {
		if err := removeStateDir(dir); err != nil {
			return err
		}
		fmt.Fprintln(s.out, "no sandbox is running")
		return nil
	}
	// SIGTERM the supervisor alone: it stops the others in order. Without
	// a supervisor, each process's group.
	if ours[0] == recs[0] {
		if err := signalVerified(ours[0], syscall.SIGTERM, false); err != nil && !errors.Is(err, errNotOurs) {
			return err
		}
	} else {
		for _, r := range ours {
			if err := signalVerified(r, syscall.SIGTERM, true); err != nil && !errors.Is(err, errNotOurs) {
				return err
			}
		}
	}
	left := s.wait(ours, s.grace)
	for _, r := range left {
		fmt.Fprintf(s.out, "pid %d did not stop within %s of SIGTERM: killing its process group\n", r.pid, s.grace)
		if err := signalVerified(r, syscall.SIGKILL, true); err != nil && !errors.Is(err, errNotOurs) {
			return err
		}
	}
	if left = s.wait(left, killWait); len(left) > 0 {
		pids := make([]string, len(left))
		for i, r := range left {
			pids[i] = fmt.Sprint(r.pid)
		}
		return fmt.Errorf("pids %s still run after SIGKILL; %s is kept", strings.Join(pids, ", "), dir)
	}
	if err := removeStateDir(dir); err != nil {
		return err
	}
	fmt.Fprintln(s.out, "sandbox stopped")
	return nil
}

// survey returns the records whose process is still running, and, when
// report is set, says which recorded pids now belong to other processes.
func (s stopper) survey(dir string, recs []procRecord, report bool) []procRecord {
	var ours []procRecord
	for _, r := range recs {
		switch status, _, why := check(r); status {
		case procOurs:
			ours = append(ours, r)
		case procForeign:
			if report {
				fmt.Fprintf(s.out, "pid %d (in %s) is not the sandbox's process any more (%s): not signalled\n", r.pid, filepath.Join(dir, pidsFile), why)
			}
		}
	}
	return ours
}

// wait polls until none of recs runs or d has passed, and returns those
// still running.
func (s stopper) wait(recs []procRecord, d time.Duration) []procRecord {
	deadline := s.clock.Now().Add(d)
	for {
		left := s.survey("", recs, false)
		if len(left) == 0 || !s.clock.Now().Before(deadline) {
			return left
		}
		s.clock.Sleep(s.poll)
	}
}
