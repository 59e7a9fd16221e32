package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/internal/manifest"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// ScenarioKind and ScenarioAPIVersion identify a scenario document.
const (
	ScenarioKind       = "Scenario"
	ScenarioAPIVersion = "simulate.nodewright.dev/v1alpha1"
)

// Scenario is a simulation script: manifests applied at the start and
// steps at given offsets.
type Scenario struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec ScenarioSpec `json:"spec"`
}

// ScenarioSpec is the script.
type ScenarioSpec struct {
	// Duration of simulated time (default 1h).
	Duration *Duration `json:"duration,omitempty"`
	// BootDelay: how long a launched node takes to turn Ready (default 30s).
	BootDelay *Duration `json:"bootDelay,omitempty"`
	// Manifests (files or directories, relative to the scenario file) are
	// applied at the start.
	Manifests []string `json:"manifests,omitempty"`
	Steps     []Step   `json:"steps,omitempty"`
	// Faults injected during the run (see Faults); `nodewright simulate
	// --chaos` fills in the kinds left out.
	Faults *Faults `json:"faults,omitempty"`
	// InstanceTypes, when set, are the only instance types of the catalog
	// the simulated cloud sells (a small cloud simulates faster).
	InstanceTypes []string `json:"instanceTypes,omitempty"`
}

// Step is one action at an offset from the start. Exactly one action is
// set.
type Step struct {
	At Duration `json:"at"`
	// Apply manifests (files or directories, relative to the scenario).
	Apply []string `json:"apply,omitempty"`
	// Delete an object.
	Delete *ObjectRef `json:"delete,omitempty"`
	// Scale a Deployment, ReplicaSet or StatefulSet.
	Scale *Scale `json:"scale,omitempty"`
	// Jobs creates Jobs whose pods run for a duration.
	Jobs *Jobs `json:"jobs,omitempty"`
	// Cordon or DeleteNodes picks nodes (oldest first) and cordons or
	// deletes them.
	Cordon      *NodeSelection `json:"cordon,omitempty"`
	DeleteNodes *NodeSelection `json:"deleteNodes,omitempty"`
	// InsufficientCapacity marks offerings out of capacity (launches fail)
	// until Restore.
	InsufficientCapacity *Offering `json:"insufficientCapacity,omitempty"`
	RestoreCapacity      *Offering `json:"restoreCapacity,omitempty"`
	// Interrupt reclaims spot nodes: their NodeClaims are deleted and
	// drained, as an interruption notice makes Karpenter do.
	Interrupt *NodeSelection `json:"interrupt,omitempty"`
	// PatchNodePool merges a patch into a NodePool.
	PatchNodePool *NodePoolPatch `json:"patchNodePool,omitempty"`
}

// ObjectRef names an object.
type ObjectRef struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// Scale sets a workload's replicas.
type Scale struct {
	ObjectRef `json:",inline"`
	Replicas  int32 `json:"replicas"`
}

// Jobs describes Count Jobs of Parallelism pods each (Completions in all),
// every pod running Duration and requesting CPU and Memory.
type Jobs struct {
	Name        string             `json:"name"`
	Namespace   string             `json:"namespace,omitempty"`
	Count       int                `json:"count,omitempty"`
	Parallelism int32              `json:"parallelism,omitempty"`
	Completions int32              `json:"completions,omitempty"`
	Duration    Duration           `json:"duration"`
	CPU         *resource.Quantity `json:"cpu,omitempty"`
	Memory      *resource.Quantity `json:"memory,omitempty"`
	// NodeSelector for the Jobs' pods.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// NodeSelection picks nodes: by name, or Count of the oldest matching the
// NodePool and capacity type (all when Count is 0).
type NodeSelection struct {
	Names        []string `json:"names,omitempty"`
	Count        int      `json:"count,omitempty"`
	NodePool     string   `json:"nodePool,omitempty"`
	CapacityType string   `json:"capacityType,omitempty"`
}

// Offering names an instance type in a zone with a capacity type; empty
// zone or capacity type mean all.
type Offering struct {
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone,omitempty"`
	CapacityType string `json:"capacityType,omitempty"`
}

// NodePoolPatch is a JSON merge patch for a NodePool.
type NodePoolPatch struct {
	Name  string          `json:"name"`
	Patch json.RawMessage `json:"patch"`
}

// Input is what a simulation starts from: a scenario (possibly empty) and
// the manifests it applies at the start, read and checked before anything
// runs.
type Input struct {
	Scenario Scenario
	// Initial are the manifests applied at the start.
	Initial *manifest.Set
	// StepManifests are the manifests of each Apply step, by step index.
	StepManifests map[int]*manifest.Set
	// Source names where the scenario came from, for messages.
	Source string
}

// Catalog is the part of types the scenario's cloud sells: those
// spec.instanceTypes names, else all of them.
func (in *Input) Catalog(types []catalog.InstanceType) ([]catalog.InstanceType, error) {
	names := in.Scenario.Spec.InstanceTypes
	if len(names) == 0 {
		return types, nil
	}
	var out []catalog.InstanceType
	for i, name := range names {
		j := slices.IndexFunc(types, func(it catalog.InstanceType) bool { return it.Name == name })
		if j < 0 {
			return nil, fmt.Errorf("%s: spec.instanceTypes[%d]: %q is not in the catalog", in.Source, i, name)
		}
		out = append(out, types[j])
	}
	return out, nil
}

// Load reads paths: scenario files (kind Scenario) and plain manifests
// (files or directories, applied at the start). At most one scenario.
func Load(paths ...string) (*Input, error) {
	return load(manifest.OS, paths)
}

// LoadFS is Load on a file system (the embedded examples).
func LoadFS(fsys fs.FS, paths ...string) (*Input, error) {
	return load(fsys, paths)
}

func load(fsys fs.FS, paths []string) (*Input, error) {
	in := &Input{Initial: &manifest.Set{}, StepManifests: map[int]*manifest.Set{}}
	scenarios := 0
	for _, p := range paths {
		files, err := manifest.Files(fsys, p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			data, err := fs.ReadFile(fsys, f)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", f, err)
			}
			if !isScenario(data) {
				if err := in.Initial.Add(f, data); err != nil {
					return nil, err
				}
				continue
			}
			if scenarios++; scenarios > 1 {
				return nil, fmt.Errorf("%s: a second scenario (%s was the first); give one", f, in.Source)
			}
			in.Source = f
			if err := parseScenario(f, data, &in.Scenario); err != nil {
				return nil, err
			}
			dir := path.Dir(f)
			for i, m := range in.Scenario.Spec.Manifests {
				if err := addFiles(fsys, in.Initial, path.Join(dir, m)); err != nil {
					return nil, fmt.Errorf("%s: spec.manifests[%d]: %w", f, i, err)
				}
			}
			for i, s := range in.Scenario.Spec.Steps {
				if len(s.Apply) == 0 {
					continue
				}
				set := &manifest.Set{}
				for j, m := range s.Apply {
					if err := addFiles(fsys, set, path.Join(dir, m)); err != nil {
						return nil, fmt.Errorf("%s: spec.steps[%d].apply[%d]: %w", f, i, j, err)
					}
				}
				in.StepManifests[i] = set
			}
		}
	}
	for _, set := range append([]*manifest.Set{in.Initial}, slices.Collect(maps.Values(in.StepManifests))...) {
		for _, j := range set.Jobs {
			if _, err := JobDuration(j); err != nil {
				return nil, err
			}
		}
	}
	return in, nil
}

func addFiles(fsys fs.FS, set *manifest.Set, p string) error {
	files, err := manifest.Files(fsys, p)
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return fmt.Errorf("reading %s: %w", f, err)
		}
		if isScenario(data) {
			return fmt.Errorf("%s is a scenario, not a manifest", f)
		}
		if err := set.Add(f, data); err != nil {
			return err
		}
	}
	return nil
}

// isScenario: a document whose kind is Scenario.
func isScenario(data []byte) bool {
	var tm struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(firstDocument(data), &tm); err != nil {
		return false
	}
	return tm.Kind == ScenarioKind
}

func firstDocument(data []byte) []byte {
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		if len(bytes.TrimSpace(doc)) > 0 {
			return doc
		}
	}
	return data
}

// parseScenario decodes strictly and checks every step.
func parseScenario(source string, data []byte, s *Scenario) error {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	strict, err := kjson.UnmarshalStrict(js, s)
	if err != nil {
		return fmt.Errorf("%s: %w", source, locate(js, err))
	}
	if len(strict) > 0 {
		return fmt.Errorf("%s: %w", source, errors.Join(strict...))
	}
	if s.APIVersion != ScenarioAPIVersion {
		return fmt.Errorf("%s: apiVersion %q: want %s", source, s.APIVersion, ScenarioAPIVersion)
	}
	var errs []error
	if err := s.Spec.Faults.validate("spec.faults"); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", source, err))
	}
	for i, step := range s.Spec.Steps {
		if err := step.validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: spec.steps[%d] (at %s): %w", source, i, time.Duration(step.At), err))
		}
	}
	return errors.Join(errs...)
}

// locate finds the step a decoding error comes from, so the message names
// it (the decoder names fields, not list items, for values that do not
// parse).
func locate(js []byte, err error) error {
	var raw struct {
		Spec struct {
			Steps []json.RawMessage `json:"steps"`
		} `json:"spec"`
	}
	if json.Unmarshal(js, &raw) != nil {
		return err
	}
	for i, step := range raw.Spec.Steps {
		var s Step
		if _, stepErr := kjson.UnmarshalStrict(step, &s); stepErr != nil {
			return fmt.Errorf("spec.steps[%d]: %w", i, stepErr)
		}
	}
	return err
}

func (s Step) actions() []string {
	var out []string
	for _, a := range []struct {
		name string
		set  bool
	}{
		{"apply", len(s.Apply) > 0}, {"delete", s.Delete != nil}, {"scale", s.Scale != nil}, {"jobs", s.Jobs != nil},
		{"cordon", s.Cordon != nil}, {"deleteNodes", s.DeleteNodes != nil}, {"insufficientCapacity", s.InsufficientCapacity != nil},
		{"restoreCapacity", s.RestoreCapacity != nil}, {"interrupt", s.Interrupt != nil}, {"patchNodePool", s.PatchNodePool != nil},
	} {
		if a.set {
			out = append(out, a.name)
		}
	}
	return out
}

func (s Step) validate() error {
	if s.At < 0 {
		return fmt.Errorf("at: %s is before the start", time.Duration(s.At))
	}
	switch acts := s.actions(); len(acts) {
	case 0:
		return fmt.Errorf("no action: give one of apply, delete, scale, jobs, cordon, deleteNodes, insufficientCapacity, restoreCapacity, interrupt, patchNodePool")
	case 1:
	default:
		return fmt.Errorf("%d actions (%s): give one per step", len(acts), strings.Join(acts, ", "))
	}
	switch {
	case s.Delete != nil:
		return s.Delete.validate("delete")
	case s.Scale != nil:
		if err := s.Scale.ObjectRef.validate("scale"); err != nil {
			return err
		}
		switch s.Scale.Kind {
		case "Deployment", "ReplicaSet", "StatefulSet":
		default:
			return fmt.Errorf("scale.kind: %q cannot be scaled (Deployment, ReplicaSet or StatefulSet)", s.Scale.Kind)
		}
		if s.Scale.Replicas < 0 {
			return fmt.Errorf("scale.replicas: %d is negative", s.Scale.Replicas)
		}
	case s.Jobs != nil:
		j := s.Jobs
		if j.Name == "" {
			return fmt.Errorf("jobs.name: required")
		}
		if j.Duration <= 0 {
			return fmt.Errorf("jobs.duration: required and positive")
		}
		for _, q := range []struct {
			field string
			value *resource.Quantity
		}{{"jobs.cpu", j.CPU}, {"jobs.memory", j.Memory}} {
			if q.value != nil && q.value.Sign() < 0 {
				return fmt.Errorf("%s: %s is negative", q.field, q.value)
			}
		}
		if j.Count < 0 || j.Parallelism < 0 || j.Completions < 0 {
			return fmt.Errorf("jobs: count, parallelism and completions cannot be negative")
		}
	case s.InsufficientCapacity != nil && s.InsufficientCapacity.InstanceType == "":
		return fmt.Errorf("insufficientCapacity.instanceType: required")
	case s.RestoreCapacity != nil && s.RestoreCapacity.InstanceType == "":
		return fmt.Errorf("restoreCapacity.instanceType: required")
	case s.PatchNodePool != nil:
		if s.PatchNodePool.Name == "" {
			return fmt.Errorf("patchNodePool.name: required")
		}
		var obj map[string]any
		if err := json.Unmarshal(s.PatchNodePool.Patch, &obj); err != nil || obj == nil {
			return fmt.Errorf("patchNodePool.patch: an object is required")
		}
	}
	for _, sel := range []struct {
		field string
		sel   *NodeSelection
	}{{"cordon", s.Cordon}, {"deleteNodes", s.DeleteNodes}, {"interrupt", s.Interrupt}} {
		if sel.sel != nil && sel.sel.Count < 0 {
			return fmt.Errorf("%s.count: %d is negative", sel.field, sel.sel.Count)
		}
	}
	return nil
}

func (r ObjectRef) validate(field string) error {
	if r.Kind == "" || r.Name == "" {
		return fmt.Errorf("%s: kind and name are required", field)
	}
	if _, ok := kinds[r.Kind]; !ok {
		return fmt.Errorf("%s.kind: unknown kind %q", field, r.Kind)
	}
	return nil
}
