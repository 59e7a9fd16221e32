package controlplane

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one control-plane binary running as a child of the test binary.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done is closed
	log  *os.File
}

// startProcess starts bin with args, sending its output to dir/<name>.log
// (and to extra, when not nil). env, when not empty, is added to the test
// binary's environment.
func startProcess(name, bin, dir string, args, env []string, extra io.Writer) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating log for %s: %w", name, err)
	}
	var out io.Writer = logFile
	if extra != nil {
		out = io.MultiWriter(logFile, extra)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = out
	cmd.Stderr = out
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // signals to the test's group do not reach it twice
		Pdeathsig: syscall.SIGKILL, // and it dies with the test binary, whatever happens
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{}), log: logFile}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop asks the process to terminate, kills it after grace, and waits for it.
func (p *process) stop(grace time.Duration) error {
	defer p.log.Close()
	if done, _ := p.exited(); done {
		return nil
	}
	// Signal the whole group so any helper the binary forked goes too.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s: %w", p.name, err)
	}
	<-p.done
	return nil
}
