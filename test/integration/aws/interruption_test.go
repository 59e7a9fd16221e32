//go:build integration

package aws_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/operator"
)

// A spot interruption warning on the queue: the node is cordoned, its
// pods get a new spot node (another offering: the interrupted one is
// unavailable for a while), then the interrupted NodeClaim and instance
// go and the pods run on the new node.
func TestSpotInterruptionReplacesTheNode(t *testing.T) {
	ctx := context.Background()
	c := startWith(t, func(conf *operator.Config) { conf.AWS.InterruptionQueue = clusterName })
	apply(ctx, t, c.kube, "ec2nodeclass-default.yaml", "nodepool-default.yaml")
	if err := c.kube.Create(ctx, generalApp("spotty", "m5", 2)); err != nil {
		t.Fatal(err)
	}
	var first *corev1.Node
	waitFor(ctx, t, 3*time.Minute, "the pods running on a spot node", func(ctx context.Context) (bool, error) {
		nodes, running, err := podsOn(ctx, c.kube, "spotty")
		for _, n := range nodes {
			first = n
		}
		return running == 2 && len(nodes) == 1, err
	})
	if first.Labels[karpv1.LabelCapacityType] != "spot" {
		t.Fatalf("node %s is %s, want spot", first.Name, first.Labels[karpv1.LabelCapacityType])
	}
	instance := first.Spec.ProviderID[strings.LastIndex(first.Spec.ProviderID, "/")+1:]
	if err := c.fake.Send(clusterName, "spot-interruption", instance); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, 3*time.Minute, "the pods running on another node, the interrupted one gone", func(ctx context.Context) (bool, error) {
		nodes, running, err := podsOn(ctx, c.kube, "spotty")
		if err != nil || running != 2 {
			return false, err
		}
		for name := range nodes {
			if name == first.Name {
				return false, nil
			}
		}
		err = c.kube.Get(ctx, client.ObjectKeyFromObject(first), &corev1.Node{})
		return client.IgnoreNotFound(err) == nil && err != nil, client.IgnoreNotFound(err)
	})
	for _, in := range c.fake.Instances() {
		if in.ID == instance && in.State != "terminated" {
			t.Errorf("the interrupted instance %s is %s, want terminated", in.ID, in.State)
		}
	}
	if n := counter(t, "karpenter_nodeclaims_disrupted_total", "reason", "spot_interrupted"); n < 1 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{reason=spot_interrupted} = %v, want at least 1", n)
	}
	if n := counter(t, "karpenter_interruption_received_messages_total", "message_type", "spot_interrupted"); n < 1 {
		t.Errorf("karpenter_interruption_received_messages_total{message_type=spot_interrupted} = %v, want at least 1", n)
	}
}

// counter sums a metric's series whose label has a value.
func counter(t *testing.T, name, label, value string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
