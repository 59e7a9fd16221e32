package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodewright/nodewright/test/integration/controlplane"
)

// child is a process the test started, reaped in the background so that
// its fate (which signal ended it) can be read afterwards.
type child struct {
	cmd  *exec.Cmd
	done chan error
	once sync.Once
	sig  syscall.Signal
}

// startChild starts argv in its own process group, so that no signal
// meant for its group reaches the test.
func startChild(t *testing.T, env []string, argv ...string) *child {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() { c.endedBy(t) })
	return c
}

// endedBy kills the child if it is still running and returns the signal
// that ended it: SIGKILL means nobody but this call signalled it.
func (c *child) endedBy(t *testing.T) syscall.Signal {
	t.Helper()
	c.once.Do(func() {
		if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("killing pid %d: %v", c.cmd.Process.Pid, err)
		}
		<-c.done
		if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			c.sig = ws.Signal()
		}
	})
	return c.sig
}

func testBootID(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	return strings.TrimSpace(string(raw))
}

// stateDir makes a sandbox state directory as `up` leaves it, with the
// given pids file.
func stateDir(t *testing.T, pids string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, markerFile), []byte(markerText), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pids"), []byte(pids), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A pid in the state file that now belongs to another process (same pid,
// same executable, another start time: the pid was recycled) is never
// signalled by `down`.
func TestDownDoesNotSignalARecycledPid(t *testing.T) {
	boot := testBootID(t)
	sleep := startChild(t, nil, "sleep", "60")
	pid := sleep.cmd.Process.Pid
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Start time 1: a process that started one tick after boot, long gone.
	dir := stateDir(t, fmt.Sprintf("%d start=1 boot=%s exe=%q\n", pid, boot, exe))

	_ = down(dir)

	if sig := sleep.endedBy(t); sig != syscall.SIGKILL {
		t.Fatalf("down signalled pid %d (ended by %v), which the state file recorded with another start time", pid, sig)
	}
}

// `up --state .` in a directory holding someone's files refuses, names
// the flag, and deletes nothing.
func TestUpRefusesTheCurrentDirectory(t *testing.T) {
	cwd := t.TempDir()
	notes := filepath.Join(cwd, "notes.txt")
	if err := os.WriteFile(notes, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	t.Setenv(controlplane.EnvBinDir, t.TempDir())
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}

	err = up(dir, "kwok", kwokBuiltin)

	if err == nil || !strings.Contains(err.Error(), "--state") {
		t.Errorf("up --state . = %v, want an error naming --state", err)
	}
	if got, err := os.ReadFile(notes); err != nil || string(got) != "mine" {
		t.Fatalf("notes.txt after up --state .: %q, %v; want it untouched", got, err)
	}
}

func testStopper(out io.Writer) stopper {
	return stopper{clock: clock.RealClock{}, grace: 100 * time.Millisecond, poll: 10 * time.Millisecond, out: out}
}

// The recorded supervisor, still itself, gets SIGTERM, and the state
// directory goes once it has exited.
func TestDownStopsTheRecordedSupervisor(t *testing.T) {
	testBootID(t)
	sleep := startChild(t, nil, "sleep", "60")
	rec, err := record(sleep.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	dir := stateDir(t, rec.String()+"\n")
	var out strings.Builder

	if err := testStopper(&out).down(dir); err != nil {
		t.Fatalf("down: %v\n%s", err, out.String())
	}

	if sig := sleep.endedBy(t); sig != syscall.SIGTERM {
		t.Errorf("the supervisor was ended by %v, want SIGTERM", sig)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state directory after down: %v, want it removed", err)
	}
}

// A recorded process that ignores SIGTERM is killed with its process
// group once the grace period is over.
func TestDownKillsAProcessThatIgnoresSIGTERM(t *testing.T) {
	testBootID(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	stubborn := startChild(t, []string{envChild + "=ignore-term"}, self)
	pid := stubborn.cmd.Process.Pid
	// Wait until the child has ignored SIGTERM: its signal mask in /proc.
	for !ignoresTerm(t, pid) {
		time.Sleep(10 * time.Millisecond)
	}
	rec, err := record(pid)
	if err != nil {
		t.Fatal(err)
	}
	dir := stateDir(t, rec.String()+"\n")
	var out strings.Builder

	if err := testStopper(&out).down(dir); err != nil {
		t.Fatalf("down: %v\n%s", err, out.String())
	}

	if !strings.Contains(out.String(), "killing its process group") {
		t.Errorf("down said %q, want it to say it killed pid %d", out.String(), pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state directory after down: %v, want it removed", err)
	}
}

// ignoresTerm reports whether pid ignores SIGTERM (bit 15 of SigIgn).
func ignoresTerm(t *testing.T, pid int) bool {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return mask&(1<<(syscall.SIGTERM-1)) != 0
		}
	}
	return false
}

// A directory without the marker is not the sandbox's: down neither
// signals the pids it names nor deletes it.
func TestDownLeavesADirectoryWithoutTheMarker(t *testing.T) {
	testBootID(t)
	sleep := startChild(t, nil, "sleep", "60")
	rec, err := record(sleep.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pids"), []byte(rec.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder

	err = testStopper(&out).down(dir)

	if err == nil || !strings.Contains(err.Error(), "--state "+dir) {
		t.Errorf("down = %v, want an error naming --state %s", err, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "pids")); err != nil {
		t.Errorf("pids after down: %v, want it kept", err)
	}
	if sig := sleep.endedBy(t); sig != syscall.SIGKILL {
		t.Errorf("pid %d was ended by %v: down signalled it", sleep.cmd.Process.Pid, sig)
	}
}

func TestPrepareStateDir(t *testing.T) {
	write := func(t *testing.T, path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		// setup returns the --state directory, made under root.
		setup func(t *testing.T, root string) string
		// refused: the error's text after the flag; "" when accepted.
		refused string
		// kept: a file that must survive.
		kept string
	}{
		{name: "root", setup: func(*testing.T, string) string { return "/" }, refused: "root directory"},
		{name: "home", refused: "home directory", setup: func(t *testing.T, root string) string {
			t.Setenv("HOME", filepath.Join(root, "home"))
			write(t, filepath.Join(root, "home", ".bashrc"), "")
			return filepath.Join(root, "home")
		}, kept: "home/.bashrc"},
		{name: "above home", refused: "home directory", setup: func(t *testing.T, root string) string {
			t.Setenv("HOME", filepath.Join(root, "home", "me"))
			return filepath.Join(root, "home")
		}},
		{name: "current directory, empty", refused: "current directory", setup: func(t *testing.T, root string) string {
			t.Chdir(root)
			return root
		}},
		{name: "above the current directory", refused: "current directory", setup: func(t *testing.T, root string) string {
			if err := os.MkdirAll(filepath.Join(root, "a", "b"), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Chdir(filepath.Join(root, "a", "b"))
			return filepath.Join(root, "a")
		}},
		{name: "a source tree", refused: "holds go.mod", setup: func(t *testing.T, root string) string {
			write(t, filepath.Join(root, "repo", "go.mod"), "module x\n")
			return filepath.Join(root, "repo")
		}, kept: "repo/go.mod"},
		{name: "someone's directory", refused: "not empty and has no " + markerFile, setup: func(t *testing.T, root string) string {
			write(t, filepath.Join(root, "photos", "cat.jpg"), "meow")
			return filepath.Join(root, "photos")
		}, kept: "photos/cat.jpg"},
		{name: "a file", refused: "not a directory", setup: func(t *testing.T, root string) string {
			write(t, filepath.Join(root, "f"), "data")
			return filepath.Join(root, "f")
		}, kept: "f"},
		{name: "new", setup: func(t *testing.T, root string) string { return filepath.Join(root, "new", "state") }},
		{name: "empty", setup: func(t *testing.T, root string) string {
			if err := os.Mkdir(filepath.Join(root, "empty"), 0o755); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(root, "empty")
		}},
		{name: "a previous sandbox's", setup: func(t *testing.T, root string) string {
			write(t, filepath.Join(root, "old", markerFile), markerText)
			write(t, filepath.Join(root, "old", "sandbox.log"), "old log")
			return filepath.Join(root, "old")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dir := tt.setup(t, root)

			err := prepareStateDir(dir)

			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), "--state "+dir) || !strings.Contains(err.Error(), tt.refused) {
					t.Errorf("prepareStateDir(%s) = %v, want an error naming --state and %q", dir, err, tt.refused)
				}
				if tt.kept != "" {
					if _, err := os.Stat(filepath.Join(root, tt.kept)); err != nil {
						t.Errorf("%s: %v, want it kept", tt.kept, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("prepareStateDir(%s) = %v", dir, err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 || entries[0].Name() != markerFile {
				t.Errorf("%s holds %v, want only %s", dir, entries, markerFile)
			}
		})
	}
}

func TestParseRecords(t *testing.T) {
	recs := []procRecord{
		{pid: 42, start: 123456, boot: "5e1f", exe: "/opt/my tools 1234/sandbox"},
		{pid: 43, start: 7, boot: "5e1f", exe: `/odd "name"`},
	}
	var b strings.Builder
	for _, r := range recs {
		b.WriteString(r.String() + "\n")
	}
	got, err := parseRecords("pids", []byte(b.String()))
	if err != nil || !slices.Equal(got, recs) {
		t.Errorf("parseRecords(%q) = %v, %v; want %v", b.String(), got, err, recs)
	}

	bad := []struct{ name, data, want string }{
		{"older format", "42\n", "pids:1: \"42\": want `PID start="},
		{"pid", "x start=1 boot=b exe=\"/e\"\n", `pids:1: pid "x"`},
		{"start", "42 start=soon boot=b exe=\"/e\"\n", `pids:1: start "soon"`},
		{"boot", "42 start=1 b exe=\"/e\"\n", `want boot=ID`},
		{"exe", "\n42 start=1 boot=b exe=/e\n", `pids:2: exe /e`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseRecords("pids", []byte(tt.data)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseRecords(%q) = %v, want an error containing %q", tt.data, err, tt.want)
			}
		})
	}
}
