package controlplane

import (
	"bytes"
	"testing"

	"sigs.k8s.io/yaml"
)

// The configuration given to the real kwok holds one KwokConfiguration and
// the stages that play a kubelet, each acting at once but the heartbeat.
func TestKWOKConfigPlaysAKubeletWithoutDelay(t *testing.T) {
	type stage struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			ResourceRef struct {
				Kind string `json:"kind"`
			} `json:"resourceRef"`
			Delay *struct {
				DurationMilliseconds int `json:"durationMilliseconds"`
			} `json:"delay"`
			Next struct {
				StatusTemplate string `json:"statusTemplate"`
				Delete         bool   `json:"delete"`
			} `json:"next"`
		} `json:"spec"`
	}
	stages := map[string]stage{}
	configs := 0
	for _, doc := range bytes.Split(KWOKConfig(), []byte("\n---\n")) {
		var s stage
		if err := yaml.Unmarshal(doc, &s); err != nil {
			t.Fatalf("kwok.yaml document %q: %v", doc, err)
		}
		switch s.Kind {
		case "KwokConfiguration":
			configs++
		case "Stage":
			if _, dup := stages[s.Metadata.Name]; dup {
				t.Errorf("stage %s defined twice", s.Metadata.Name)
			}
			stages[s.Metadata.Name] = s
		default:
			t.Errorf("kwok.yaml document of kind %q", s.Kind)
		}
	}
	if configs != 1 {
		t.Errorf("%d KwokConfigurations, want 1", configs)
	}
	tests := []struct {
		name, kind string
		delayed    bool
		delete     bool
	}{
		{name: "nodewright-node-ready", kind: "Node"},
		{name: "nodewright-node-heartbeat", kind: "Node", delayed: true},
		{name: "nodewright-pod-running", kind: "Pod"},
		{name: "nodewright-pod-delete", kind: "Pod", delete: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := stages[tt.name]
			if !ok {
				t.Fatalf("no stage %s in kwok.yaml", tt.name)
			}
			if s.Spec.ResourceRef.Kind != tt.kind {
				t.Errorf("plays %s, want %s", s.Spec.ResourceRef.Kind, tt.kind)
			}
			if (s.Spec.Delay != nil) != tt.delayed {
				t.Errorf("delay %+v: want delayed %v", s.Spec.Delay, tt.delayed)
			}
			if s.Spec.Next.Delete != tt.delete || (!tt.delete && s.Spec.Next.StatusTemplate == "") {
				t.Errorf("next %+v: want delete %v, else a status", s.Spec.Next, tt.delete)
			}
		})
	}
	if len(stages) != len(tests) {
		t.Errorf("%d stages, want %d", len(stages), len(tests))
	}
}
