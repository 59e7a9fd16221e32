package garbagecollection

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

var now = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// instance is a provider's view of an instance launched for claim name.
func instance(name, providerID string, age time.Duration) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))},
		Status:     karpv1.NodeClaimStatus{ProviderID: providerID},
	}
}

type claimOpt func(*karpv1.NodeClaim)

func registered(nc *karpv1.NodeClaim) {
	nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeRegistered, Status: metav1.ConditionTrue})
}

func deleting(nc *karpv1.NodeClaim) {
	t := metav1.NewTime(now)
	nc.DeletionTimestamp = &t
}

func claim(name, providerID string, opts ...claimOpt) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: karpv1.NodeClaimStatus{ProviderID: providerID}}
	for _, o := range opts {
		o(nc)
	}
	return nc
}

func node(providerID string, ready corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-" + providerID},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}},
	}
}

func names(ncs []*karpv1.NodeClaim) []string {
	var out []string
	for _, nc := range ncs {
		out = append(out, nc.Status.ProviderID)
	}
	return out
}

func TestDecide(t *testing.T) {
	cases := []struct {
		name          string
		instances     []*karpv1.NodeClaim
		claims        []*karpv1.NodeClaim
		nodes         []*corev1.Node
		wantInstances []string
		wantClaims    []string
	}{
		{
			name:      "an owned instance and its claim are kept",
			instances: []*karpv1.NodeClaim{instance("a", "p://a", time.Hour)},
			claims:    []*karpv1.NodeClaim{claim("a", "p://a", registered)},
		},
		{
			name:          "an old instance nobody owns is terminated",
			instances:     []*karpv1.NodeClaim{instance("gone", "p://gone", time.Minute)},
			wantInstances: []string{"p://gone"},
		},
		{
			name:      "a young unowned instance gets its grace period",
			instances: []*karpv1.NodeClaim{instance("new", "p://new", 29*time.Second)},
		},
		{
			name:      "an instance whose claim has not recorded it yet is kept (crash between launch and status)",
			instances: []*karpv1.NodeClaim{instance("a", "p://a", time.Hour)},
			claims:    []*karpv1.NodeClaim{claim("a", "")},
		},
		{
			name:          "a claim of the same name that recorded another instance does not protect this one",
			instances:     []*karpv1.NodeClaim{instance("a", "p://a-old", time.Hour), instance("a", "p://a", time.Hour)},
			claims:        []*karpv1.NodeClaim{claim("a", "p://a", registered)},
			wantInstances: []string{"p://a-old"},
		},
		{
			name:      "an instance already terminating is left alone",
			instances: []*karpv1.NodeClaim{func() *karpv1.NodeClaim { in := instance("x", "p://x", time.Hour); deleting(in); return in }()},
		},
		{
			name:       "a registered claim whose instance vanished is deleted",
			claims:     []*karpv1.NodeClaim{claim("a", "p://a", registered)},
			nodes:      []*corev1.Node{node("p://a", corev1.ConditionFalse)},
			wantClaims: []string{"p://a"},
		},
		{
			name:       "a registered claim with no node and no instance is deleted",
			claims:     []*karpv1.NodeClaim{claim("a", "p://a", registered)},
			wantClaims: []string{"p://a"},
		},
		{
			name:   "a Ready node keeps its claim even if the provider does not list it",
			claims: []*karpv1.NodeClaim{claim("a", "p://a", registered)},
			nodes:  []*corev1.Node{node("p://a", corev1.ConditionTrue)},
		},
		{
			name:   "unregistered claims are liveness's to judge",
			claims: []*karpv1.NodeClaim{claim("a", "p://a")},
		},
		{
			name:   "claims already deleting are left alone",
			claims: []*karpv1.NodeClaim{claim("a", "p://a", registered, deleting)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.instances, tc.claims, tc.nodes, now, MinInstanceAge)
			if got := names(d.Instances); !slices.Equal(got, tc.wantInstances) {
				t.Errorf("instances terminated = %v, want %v", got, tc.wantInstances)
			}
			if got := names(d.NodeClaims); !slices.Equal(got, tc.wantClaims) {
				t.Errorf("nodeclaims deleted = %v, want %v", got, tc.wantClaims)
			}
		})
	}
}
