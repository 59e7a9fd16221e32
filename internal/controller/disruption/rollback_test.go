package disruption

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// A rolled back decision whose replacements cannot be deleted (every
// Delete refused) does not keep its candidate tainted forever: once the
// decision's deadline is a minute past, the candidate is untainted and
// unmarked, and the replacement is left as ordinary capacity.
func TestRollbackReleasesTheCandidateWhenReplacementsCannotBeDeleted(t *testing.T) {
	ctx := context.Background()
	refuse := &interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		if _, ok := obj.(*karpv1.NodeClaim); ok && obj.GetName() != "web-1" {
			return apierrors.NewForbidden(karpv1.SchemeGroupVersion.WithResource("nodeclaims").GroupResource(), obj.GetName(), errors.New("injected: denied by a webhook"))
		}
		return c.Delete(ctx, obj, opts...)
	}}
	e := newEnvWith(t, refuse, boundPod("a"))
	nc := e.claim(t)
	nc.Labels[corev1.LabelInstanceTypeStable] = "m-1"
	if err := e.kube.Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc = e.claim(t)
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodePoolDrifted", LastTransitionTime: metav1.NewTime(epoch)})
	if err := e.kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	e.cluster.UpdateNodeClaim(e.claim(t))
	np := &karpv1.NodePool{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
		t.Fatal(err)
	}
	types, err := catalog.Parse("test", []byte(`[{"name": "m-1", "architecture": "amd64", "operatingSystems": ["linux"],
	  "resources": {"cpu": "2", "memory": "8Gi", "pods": "110"}, "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.1}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	pools := fixedPools{[]sched.NodePool{{NodePool: np, InstanceTypes: []*catalog.InstanceType{&types[0]}}}}
	l := NewLoop(e.kube, e.cluster, e.clock, record.NewFakeRecorder(100), nil, logr.Discard(), pools, Options{ReplacementTimeout: time.Minute})
	if _, err := l.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if !tainted(ctx, t, e.kube) {
		t.Fatal("the decision did not start")
	}
	// The replacement never initializes: the decision times out at 1m and
	// its rollback cannot delete the replacement.
	for range 30 {
		e.clock.Step(10 * time.Second)
		_, _ = l.Pass(ctx)
		syncModel(t, e.store, e.cluster)
	}
	got := e.claim(t)
	if got.DeletionTimestamp != nil {
		t.Fatal("web-1 was deleted")
	}
	if tainted(ctx, t, e.kube) || meta.FindStatusCondition(got.Status.Conditions, karpv1.ConditionTypeDisruptionReason) != nil || got.Annotations[ReplacementsAnnotation] != "" {
		t.Errorf("5 minutes on: tainted %v, conditions %+v, annotations %v: want web-1 released", tainted(ctx, t, e.kube), got.Status.Conditions, got.Annotations)
	}
	if l.Deciding("web-1") {
		t.Error("the loop still holds a decision on web-1")
	}
}
