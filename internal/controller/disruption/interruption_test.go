package disruption

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// A NodeClaim that an interrupted node's pods are planned onto (named in
// its nodewright.dev/interruption-replacements) is not consolidated while
// the interrupted NodeClaim waits for it, even though it is still empty.
func TestLoopKeepsTheReplacementsOfAnInterruptedNode(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		wantDeleted bool
	}{
		{"named by an interrupted NodeClaim: kept", map[string]string{interruptionAnnotation: "scheduled_change", interruptionReplacementsAnnotation: "web-1"}, false},
		{"named by another interrupted NodeClaim's replacements too: kept", map[string]string{interruptionAnnotation: "spot_interruption", interruptionReplacementsAnnotation: "spot-9,web-1"}, false},
		{"the interruption decision is gone: consolidated", map[string]string{interruptionReplacementsAnnotation: "web-1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			interrupted := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "spot-1", Labels: map[string]string{karpv1.LabelNodePool: "spot"}, Annotations: tc.annotations}}
			e := newEnv(t, interrupted)
			e.cluster.UpdateNodeClaim(interrupted)
			nc := e.claim(t)
			nc.Status.LastPodEventTime = metav1.NewTime(epoch)
			if err := e.kube.Status().Update(ctx, nc); err != nil {
				t.Fatal(err)
			}
			e.cluster.UpdateNodeClaim(e.claim(t))
			l := NewLoop(e.kube, e.cluster, e.clock, record.NewFakeRecorder(100), nil, logr.Discard(), nil, Options{})
			e.clock.Step(2 * time.Minute)
			for range 4 {
				if _, err := l.Pass(ctx); err != nil {
					t.Fatal(err)
				}
				syncModel(t, e.store, e.cluster)
				e.clock.Step(DefaultValidation)
			}
			if deleted := e.claim(t).DeletionTimestamp != nil; deleted != tc.wantDeleted {
				t.Errorf("web-1 (empty) deleted %v, want %v", deleted, tc.wantDeleted)
			}
		})
	}
}
