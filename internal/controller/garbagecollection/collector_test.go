package garbagecollection

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/providers/kwok"
)

func kwokNode(name string, created time.Time) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       corev1.NodeSpec{ProviderID: kwok.ProviderIDPrefix + name},
	}
}

func kwokClaim(name string, opts ...claimOpt) *karpv1.NodeClaim {
	nc := claim(name, kwok.ProviderIDPrefix+name, opts...)
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	return nc
}

func TestCollectWithKWOK(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, kwokv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	orphan := kwokNode("orphan", now.Add(-time.Minute))
	young := kwokNode("young", now.Add(-5*time.Second))
	owned := kwokNode("owned", now.Add(-time.Hour))
	foreign := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "foreign"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"}}
	kube := fake.NewClientBuilder().WithScheme(s).WithObjects(
		orphan, young, owned, foreign,
		kwokClaim("owned", registered),
		kwokClaim("vanished", registered), // its node (the kwok instance) is gone
	).Build()
	clk := clocktesting.NewFakeClock(now)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	c := New(kube, kwok.New(kube, nil), clk, MinInstanceAge, logr.Discard(), m)

	ctx := context.Background()
	d, err := c.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(d.Instances); len(got) != 1 || got[0] != kwok.ProviderIDPrefix+"orphan" {
		t.Errorf("terminated %v, want only the orphan", got)
	}
	if got := names(d.NodeClaims); len(got) != 1 || got[0] != kwok.ProviderIDPrefix+"vanished" {
		t.Errorf("deleted claims %v, want only the vanished one", got)
	}
	gone := func(o client.Object) bool {
		return apierrors.IsNotFound(kube.Get(ctx, client.ObjectKeyFromObject(o), o))
	}
	if !gone(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}}) {
		t.Error("the orphan instance still exists")
	}
	if !gone(&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "vanished"}}) {
		t.Error("the nodeclaim whose instance vanished still exists")
	}
	for _, name := range []string{"young", "owned", "foreign"} {
		if gone(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}) {
			t.Errorf("node %s was deleted", name)
		}
	}
	if gone(&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "owned"}}) {
		t.Error("the owned claim was deleted")
	}
	want := `
# HELP karpenter_nodeclaims_disrupted_total Number of nodeclaims disrupted, by reason, nodepool, capacity type, the pool's consolidation policy and how the node is terminated.
# TYPE karpenter_nodeclaims_disrupted_total counter
karpenter_nodeclaims_disrupted_total{capacity_type="",consolidation_policy="",nodepool="",reason="garbage_collected",termination_mode="forceful"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "karpenter_nodeclaims_disrupted_total"); err != nil {
		t.Error(err)
	}

	// Once past its grace period the young orphan goes too.
	clk.Step(time.Minute)
	if d, err = c.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if got := names(d.Instances); len(got) != 1 || got[0] != kwok.ProviderIDPrefix+"young" {
		t.Errorf("second round terminated %v, want the young orphan", got)
	}
}

// A round that failed (the cloud's List refused, a delete rejected) is
// tried again at the fast interval, even late in the process's life when
// rounds are 2 minutes apart: a leaked instance is not left running for
// another slow round.
func TestFailedRoundIsRetriedSoon(t *testing.T) {
	for _, tc := range []struct {
		name  string
		round int
		err   error
		want  time.Duration
	}{
		{"early round", 1, nil, FastInterval},
		{"late round", FastRounds + 5, nil, SlowInterval},
		{"late round that failed", FastRounds + 5, errors.New("listing instances: throttled"), FastInterval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := After(tc.round, tc.err); got != tc.want {
				t.Errorf("After(%d, %v) = %s, want %s", tc.round, tc.err, got, tc.want)
			}
		})
	}
}
