package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// markerFile marks a directory as a sandbox's state directory: `up`
// creates it with the directory, and `up` and `down` delete only a
// directory that holds it (or, for `up`, an empty one).
const markerFile = ".nodewright-sandbox"

const markerText = "This directory holds a Nodewright sandbox's state (kubeconfig, pids, logs).\n" +
	"'sandbox down' deletes it, with everything in it.\n"

// refuseSpecial rejects a --state that must never be deleted whatever it
// holds: the root, the home directory or one above it, the current
// directory or one above it, and a source tree.
func refuseSpecial(dir string) error {
	refuse := func(why string) error {
		return fmt.Errorf("--state %s: refusing to use it as the sandbox's state directory, which the sandbox deletes: %s", dir, why)
	}
	target := resolve(dir)
	if target == string(filepath.Separator) {
		return refuse("it is the root directory")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		if within(resolve(home), target) {
			return refuse("it is or contains your home directory")
		}
	}
	if cwd, err := os.Getwd(); err == nil {
		if within(resolve(cwd), target) {
			return refuse("it is or contains the current directory")
		}
	}
	for _, name := range []string{"go.mod", ".git"} {
		if _, err := os.Lstat(filepath.Join(target, name)); err == nil {
			return refuse("it holds " + name + ", so it looks like a source tree")
		}
	}
	return nil
}

// resolve returns dir's absolute path with symbolic links resolved, as far
// as it exists.
func resolve(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.Clean(dir)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// isSandboxDir reports whether dir holds the sandbox's marker.
func isSandboxDir(dir string) bool {
	info, err := os.Lstat(filepath.Join(dir, markerFile))
	return err == nil && info.Mode().IsRegular()
}

// prepareStateDir makes dir an empty state directory with its marker. It
// deletes the contents of a previous sandbox's directory, and refuses any
// other non-empty directory.
func prepareStateDir(dir string) error {
	if err := refuseSpecial(dir); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("--state %s: %w", dir, err)
	case len(entries) == 0:
	case !isSandboxDir(dir):
		return fmt.Errorf("--state %s: the directory is not empty and has no %s file, so it is not a sandbox's state directory: refusing to delete it (name a new or empty directory)", dir, markerFile)
	default:
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("--state %s: removing the previous sandbox's state: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--state %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, markerFile), []byte(markerText), 0o644); err != nil {
		return fmt.Errorf("--state %s: writing its marker: %w", dir, err)
	}
	return nil
}

// removeStateDir deletes a sandbox's state directory; a directory without
// the marker is left alone.
func removeStateDir(dir string) error {
	if err := refuseSpecial(dir); err != nil {
		return err
	}
	if !isSandboxDir(dir) {
		return fmt.Errorf("--state %s: the directory has no %s file, so it is not a sandbox's state directory: refusing to delete it", dir, markerFile)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("--state %s: %w", dir, err)
	}
	return nil
}
