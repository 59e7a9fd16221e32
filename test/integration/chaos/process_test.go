//go:build integration

package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// child is a process the test starts, kills and starts again: every
// incarnation writes to one log file, each preceded by a marker line.
type child struct {
	name    string
	bin     string
	args    []string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	// starts counts incarnations; kills counts SIGKILLs sent.
	starts, kills int
}

// startChild runs the nodewright binary bin with args until the test ends.
func startChild(t *testing.T, name, bin string, args ...string) *child {
	t.Helper()
	c := &child{name: name, bin: bin, args: args, logPath: filepath.Join(t.TempDir(), name+".log")}
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	return c
}

// start runs a new incarnation. The process has its own process group
// (signals to the test's group do not reach it) and dies with the test
// binary whatever happens (parent-death signal).
func (c *child) start() error {
	log, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("opening the log of %s: %w", c.name, err)
	}
	defer log.Close()
	c.starts++
	fmt.Fprintf(log, "=== %s incarnation %d started %s\n", c.name, c.starts, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(c.bin, c.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", c.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c.cmd, c.done = cmd, done
	return nil
}

// exited reports whether the current incarnation has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL to the current incarnation (by its pid) and waits for
// it to be gone.
func (c *child) kill() error {
	c.kills++
	if c.exited() {
		return fmt.Errorf("%s had already exited before kill %d:\n%s", c.name, c.kills, c.tail(30))
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", c.name, err)
	}
	<-c.done
	return nil
}

// restart kills the current incarnation and starts the next one at once.
func (c *child) restart() error {
	if err := c.kill(); err != nil {
		return err
	}
	return c.start()
}

// stop ends the current incarnation: SIGTERM, then SIGKILL after 10 s.
func (c *child) stop() {
	if c.cmd == nil || c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.done
	}
}

// tail returns the last n lines of the log, leaving out controller-runtime's
// start-up lines.
func (c *child) tail(n int) string {
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		return err.Error()
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if !strings.Contains(line, `"msg":"Starting `) {
			lines = append(lines, line)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitLog waits for a line of the log starting with prefix and returns
// the rest of it.
func (c *child) waitLog(ctx context.Context, prefix string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		data, _ := os.ReadFile(c.logPath)
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				return strings.TrimSpace(rest), nil
			}
		}
		if c.exited() {
			return "", fmt.Errorf("%s exited before printing %q:\n%s", c.name, prefix, c.tail(30))
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s printed no %q within %s:\n%s", c.name, prefix, timeout, c.tail(30))
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
