package interruption_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/providers/aws/interruption"
)

// Decision reads what the controller wrote, and a deadline it cannot read
// is an error that names the NodeClaim and the annotation, not a panic.
func TestDecision(t *testing.T) {
	cases := []struct {
		name        string
		annotations map[string]string
		kind        interruption.Kind
		deadline    time.Time
		ok          bool
		err         string
	}{
		{"none", nil, "", time.Time{}, false, ""},
		{"recorded", map[string]string{interruption.AnnotationInterruption: "scheduled_change", interruption.AnnotationInterruptionDeadline: "2026-11-30T10:05:00Z"},
			interruption.ScheduledChange, time.Date(2026, 11, 30, 10, 5, 0, 0, time.UTC), true, ""},
		{"deadline missing", map[string]string{interruption.AnnotationInterruption: "spot_interrupted"},
			interruption.SpotInterrupted, time.Time{}, true, "nodeclaim c1: annotation " + interruption.AnnotationInterruptionDeadline},
		{"deadline not a time", map[string]string{interruption.AnnotationInterruption: "spot_interrupted", interruption.AnnotationInterruptionDeadline: "soon"},
			interruption.SpotInterrupted, time.Time{}, true, "nodeclaim c1: annotation " + interruption.AnnotationInterruptionDeadline},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c1", Annotations: tc.annotations}}
			kind, deadline, ok, err := interruption.Decision(nc)
			if kind != tc.kind || !deadline.Equal(tc.deadline) || ok != tc.ok {
				t.Errorf("Decision = %q %v %v, want %q %v %v", kind, deadline, ok, tc.kind, tc.deadline, tc.ok)
			}
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}
