//go:build integration

package aws_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/providers/aws/fake"
)

// A class whose subnet selector matches nothing is not Ready, says which
// selector, and its NodePool launches nothing for pending pods.
func TestNodeClassMatchingNoSubnetLaunchesNothing(t *testing.T) {
	ctx := context.Background()
	c := start(t)
	apply(ctx, t, c.kube, "ec2nodeclass-default.yaml", "nodepool-default.yaml")
	class := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
		t.Fatal(err)
	}
	class.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "someone-else"}}}
	if err := c.kube.Update(ctx, class); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, time.Minute, "the class not Ready, naming the selector, and the pool not Ready", func(ctx context.Context) (bool, error) {
		if err := c.kube.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
			return false, err
		}
		subnets := meta.FindStatusCondition(class.Status.Conditions, "SubnetsReady")
		pool := &karpv1.NodePool{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: "default"}, pool); err != nil {
			return false, err
		}
		classReady := meta.FindStatusCondition(pool.Status.Conditions, karpv1.ConditionTypeNodeClassReady)
		return subnets != nil && subnets.Status == "False" && strings.Contains(subnets.Message, "someone-else") &&
			meta.IsStatusConditionFalse(class.Status.Conditions, "Ready") && classReady != nil && classReady.Status == "False", nil
	})
	if err := c.kube.Create(ctx, generalApp("stuck", "", 2)); err != nil {
		t.Fatal(err)
	}
	// Several batch windows: nothing is bought.
	time.Sleep(15 * time.Second)
	var claims karpv1.NodeClaimList
	if err := c.kube.List(ctx, &claims); err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 0 || len(c.fake.Instances()) != 0 {
		t.Errorf("%d NodeClaims and %d instances for a class that is not Ready, want none", len(claims.Items), len(c.fake.Instances()))
	}
}

// An instance tagged for the cluster and a NodePool that no NodeClaim
// owns (a leak) is terminated by garbage collection.
func TestLeakedInstanceIsTerminated(t *testing.T) {
	ctx := context.Background()
	c := start(t)
	apply(ctx, t, c.kube, "ec2nodeclass-default.yaml", "nodepool-default.yaml")
	id := c.fake.AddInstance(fake.Instance{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand", Tags: map[string]string{
		"kubernetes.io/cluster/" + clusterName: "owned", "karpenter.sh/nodepool": "default", "karpenter.sh/nodeclaim": "ghost"}})
	waitFor(ctx, t, 2*time.Minute, "the leaked instance terminated", func(ctx context.Context) (bool, error) {
		for _, in := range c.fake.Instances() {
			if in.ID == id {
				return in.State == "terminated", nil
			}
		}
		return false, nil
	})
}

// The stable pool's limit (200 CPUs) holds: asked for far more, it buys
// up to the limit and leaves the rest pending, saying why.
func TestStablePoolCPULimitHolds(t *testing.T) {
	ctx := context.Background()
	c := start(t)
	apply(ctx, t, c.kube, "ec2nodeclass-default.yaml", "nodepool-stable.yaml")
	d := generalApp("big", "", 130)
	d.Spec.Template.Spec.NodeSelector = map[string]string{"node-type": "stable"}
	d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
	if err := c.kube.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	var launched resource.Quantity
	waitFor(ctx, t, 3*time.Minute, "pods running up to the limit, the rest pending with a limits event", func(ctx context.Context) (bool, error) {
		var claims karpv1.NodeClaimList
		if err := c.kube.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: "stable"}); err != nil {
			return false, err
		}
		launched = resource.Quantity{}
		for _, nc := range claims.Items {
			launched.Add(nc.Status.Capacity[corev1.ResourceCPU])
		}
		_, running, err := podsOn(ctx, c.kube, "big")
		if err != nil || running == 0 || running == 130 {
			return false, err
		}
		var events corev1.EventList
		if err := c.kube.List(ctx, &events, client.InNamespace("default")); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if strings.HasPrefix(e.InvolvedObject.Name, "big-") && e.Reason == "FailedScheduling" && strings.Contains(e.Message, "limit") {
				return true, nil
			}
		}
		return false, nil
	})
	time.Sleep(10 * time.Second) // more batch windows change nothing
	var claims karpv1.NodeClaimList
	if err := c.kube.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: "stable"}); err != nil {
		t.Fatal(err)
	}
	total := resource.Quantity{}
	for _, nc := range claims.Items {
		total.Add(nc.Status.Capacity[corev1.ResourceCPU])
	}
	if total.Cmp(resource.MustParse("200")) > 0 {
		t.Errorf("the stable pool's NodeClaims hold %s CPUs, over its 200 limit", total.String())
	}
	if total.Cmp(resource.MustParse("100")) < 0 {
		t.Errorf("the stable pool's NodeClaims hold %s CPUs: it should buy up to its limit for 260 CPUs of pods", total.String())
	}
}
