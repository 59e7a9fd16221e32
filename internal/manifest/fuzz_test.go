package manifest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// addSeedFiles adds every .yaml, .yml and .json file under the repository's
// examples and testdata as a seed.
func addSeedFiles(f *testing.F, roots ...string) {
	f.Helper()
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch filepath.Ext(p) {
			case ".yaml", ".yml", ".json":
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				f.Add(data)
			}
			return nil
		})
		if err != nil {
			f.Fatal(err)
		}
	}
}

// hugeExponent matches a quantity whose decimal exponent may not fit an
// int32. k8s.io/apimachinery v0.37.2 truncates such an exponent and can
// then loop for minutes in ParseQuantity ("1e110000000000"); upstream
// rejects them since kubernetes/kubernetes#141203. Remove this guard once
// go.mod's apimachinery has that fix.
// Five digits, not ten: an eight-digit exponent ("e22220002") already
// takes seconds to parse, enough to hang a fuzz worker.
var hugeExponent = regexp.MustCompile(`[eE][-+]?[0-9]{5,}`)

// FuzzManifests reads arbitrary bytes as a manifest file: every input is
// either objects or an error naming the file, never a panic, and what was
// read expands to pods without a panic.
func FuzzManifests(f *testing.F) {
	addSeedFiles(f, "../../examples", "../../testdata")
	for _, s := range []string{
		"",
		"# only a comment\n---\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: -1\n",
		"apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: 3\n  completions: -2\n",
		"apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  replicas: -3\n  volumeClaimTemplates: [{metadata: {name: data}}]\n",
		"kind: Pod\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, resources: {requests: {cpu: 1e19}}}]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if hugeExponent.Match(data) {
			return // see hugeExponent
		}
		s := &Set{}
		if err := s.Add("fuzz.yaml", data); err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if replicaCount(s) > 10_000 {
			return // valid, and too many pods to expand in a fuzz run
		}
		_ = s.PendingPods()
		_ = s.BoundPods()
		_ = s.AllPersistentVolumeClaims()
	})
}

// replicaCount is the number of pods the workloads of s ask for.
func replicaCount(s *Set) int64 {
	var n int64
	add := func(p *int32) {
		if p != nil {
			n += int64(*p)
		}
	}
	for _, d := range s.Deployments {
		add(d.Spec.Replicas)
	}
	for _, r := range s.ReplicaSets {
		add(r.Spec.Replicas)
	}
	for _, st := range s.StatefulSets {
		add(st.Spec.Replicas)
	}
	for _, j := range s.Jobs {
		add(j.Spec.Parallelism)
	}
	return n
}

// A negative replica count (a crasher FuzzManifests found: expanding it
// panicked) is an error naming the object and the field.
func TestNegativeCountsAreErrors(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: -1}\n", "(Deployment web): spec.replicas: -1: must not be negative"},
		{"statefulset", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db, namespace: data}\nspec: {replicas: -3}\n", "(StatefulSet data/db): spec.replicas: -3"},
		{"job", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {parallelism: 3, completions: -2}\n", "(Job j): spec.completions: -2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Set{}
			err := s.Add("w.yaml", []byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Add = %v, want an error containing %q", err, tt.want)
			}
			if n := len(s.PendingPods()); n != 0 {
				t.Errorf("%d pods expanded from a rejected workload", n)
			}
		})
	}
}
