//go:build integration

package provisioning_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// mergeCatalog: a 2-CPU type at $0.10/h and a 4-CPU type at $0.15/h, so
// two half-used small nodes are worth merging onto one large one.
func mergeCatalog(t *testing.T) []catalog.InstanceType {
	t.Helper()
	var entries []string
	for _, it := range []struct {
		name  string
		cpu   int
		price float64
	}{{"small", 2, 0.10}, {"large", 4, 0.15}} {
		entries = append(entries, fmt.Sprintf(`{"name": %q, "architecture": "amd64", "operatingSystems": ["linux"],
		  "resources": {"cpu": "%d", "memory": "%dGi", "pods": "110"}, "offerings": [
		  {"capacityType": "on-demand", "zone": "zone-a", "price": %g}, {"capacityType": "on-demand", "zone": "zone-b", "price": %g}]}`,
			it.name, it.cpu, 4*it.cpu, it.price, it.price))
	}
	types, err := catalog.Parse("test", []byte("["+strings.Join(entries, ",")+"]"))
	if err != nil {
		t.Fatal(err)
	}
	return types
}

// consolidatingPool: a pool of small and large nodes that consolidates
// underused nodes at once, with no budget beyond the default.
func consolidatingPool(name string) *karpv1.NodePool {
	np := zonalPool(name, "small", "large")
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	return np
}

// app is a Deployment of replicas pods of cpu each on pool's nodes,
// labelled app=name.
func app(name, pool, cpu string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	grace := int64(1)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector:                  map[string]string{"node-type": pool},
				TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
			}}},
	}
}

// create creates objects, failing the test on an error.
func create(ctx context.Context, t *testing.T, kube client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// waitFor polls cond every 500 ms until it holds or timeout passes.
func waitFor(ctx context.Context, t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// claimsOf lists a pool's NodeClaims, sorted by name.
func claimsOf(ctx context.Context, kube client.Client, pool string) ([]karpv1.NodeClaim, error) {
	var list karpv1.NodeClaimList
	if err := kube.List(ctx, &list, client.MatchingLabels{karpv1.LabelNodePool: pool}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// runningOn reports the nodes the app's running pods are on.
func runningOn(ctx context.Context, kube client.Client, name string) ([]string, error) {
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": name}); err != nil {
		return nil, err
	}
	var nodes []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	return nodes, nil
}

// explainOnFailure logs, when the test has failed, what `nodewright explain
// node` says of each NodeClaim.
func explainOnFailure(ctx context.Context, t *testing.T, claims []karpv1.NodeClaim) {
	if !t.Failed() {
		return
	}
	for _, nc := range claims {
		e, err := operator.ExplainNode(ctx, cp.Config, operator.Config{InstanceTypes: mergeCatalog(t)}, nc.Name)
		if err != nil {
			t.Logf("explain %s: %v", nc.Name, err)
			continue
		}
		var b strings.Builder
		_ = e.Write(&b)
		t.Logf("explain %s:\n%s", nc.Name, b.String())
	}
}

// eventsAbout lists the events' "reason: message" on an object.
func eventsAbout(ctx context.Context, kube client.Client, kind, name string) ([]string, error) {
	var events corev1.EventList
	if err := kube.List(ctx, &events); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out, nil
}

// Two half-used small nodes ($0.10/h each) are merged onto one large node
// ($0.15/h): the large one is launched and initialized first, then the
// small ones drained; kube-scheduler binds every pod again on the new node.
func TestUnderusedNodesMergeIntoOneCheaperNode(t *testing.T) {
	ctx := context.Background()
	kube := startControllers(t, mergeCatalog(t))
	ensureNodeClass(ctx, t, kube)
	create(ctx, t, kube, consolidatingPool("merge"))
	for _, name := range []string{"merge-a", "merge-b"} {
		// One after the other: the second finds no room on the first node.
		create(ctx, t, kube, app(name, "merge", "1200m", 1))
		waitFor(ctx, t, time.Minute, name+" running", func(ctx context.Context) (bool, error) {
			nodes, err := runningOn(ctx, kube, name)
			return len(nodes) == 1, err
		})
	}
	before, err := claimsOf(ctx, kube, "merge")
	if err != nil || len(before) != 2 {
		t.Fatalf("nodeclaims %d (%v): want two small ones", len(before), err)
	}
	for _, nc := range before {
		if it := nc.Labels[corev1.LabelInstanceTypeStable]; it != "small" {
			t.Fatalf("nodeclaim %s is %s: want small", nc.Name, it)
		}
	}
	var after []karpv1.NodeClaim
	defer explainOnFailure(ctx, t, before)
	waitFor(ctx, t, 3*time.Minute, "the two small nodes merged onto one large node with both pods", func(ctx context.Context) (bool, error) {
		if after, err = claimsOf(ctx, kube, "merge"); err != nil || len(after) != 1 || after[0].Labels[corev1.LabelInstanceTypeStable] != "large" {
			return false, err
		}
		for _, name := range []string{"merge-a", "merge-b"} {
			nodes, err := runningOn(ctx, kube, name)
			if err != nil || len(nodes) != 1 || nodes[0] != after[0].Status.NodeName {
				return false, err
			}
		}
		return true, nil
	})
	for _, nc := range before {
		if nc.Name == after[0].Name {
			t.Errorf("nodeclaim %s survived the merge", nc.Name)
		}
	}
	if n := metricValue(t, "karpenter_nodeclaims_disrupted_total", map[string]string{"nodepool": "merge", "reason": "underutilized"}); n != 2 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{nodepool=merge,reason=underutilized} = %v, want 2", n)
	}
}

// A node whose only pod is behind a PDB that allows no disruption stays
// though its pod would fit elsewhere, and says why; once the PDB allows
// it, the node goes.
func TestPDBBlocksConsolidationUntilItAllows(t *testing.T) {
	ctx := context.Background()
	kube := startControllers(t, mergeCatalog(t))
	ensureNodeClass(ctx, t, kube)
	create(ctx, t, kube, consolidatingPool("pdb"))
	zero := intstr.FromInt32(0)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb-guarded", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pdb-guarded"}}}}
	create(ctx, t, kube, pdb, app("pdb-guarded", "pdb", "500m", 1))
	var guardedNode string
	waitFor(ctx, t, time.Minute, "the guarded pod running", func(ctx context.Context) (bool, error) {
		nodes, err := runningOn(ctx, kube, "pdb-guarded")
		if len(nodes) == 1 {
			guardedNode = nodes[0]
		}
		return len(nodes) == 1, err
	})
	// A large node with room for the guarded pod.
	create(ctx, t, kube, app("pdb-big", "pdb", "2500m", 1))
	waitFor(ctx, t, time.Minute, "the big pod running", func(ctx context.Context) (bool, error) {
		nodes, err := runningOn(ctx, kube, "pdb-big")
		return len(nodes) == 1 && nodes[0] != guardedNode, err
	})
	// consolidateAfter 0s, validation 15 s, passes every 10 s: well past
	// the time the node would have gone.
	var blocked []string
	waitFor(ctx, t, time.Minute, "a DisruptionBlocked event naming the PDB", func(ctx context.Context) (bool, error) {
		events, err := eventsAbout(ctx, kube, "Node", guardedNode)
		blocked = events
		return slices.ContainsFunc(events, func(e string) bool {
			return strings.HasPrefix(e, "DisruptionBlocked: ") && strings.Contains(e, "PodDisruptionBudget default/pdb-guarded allows 0")
		}), err
	})
	time.Sleep(30 * time.Second)
	if nodes, err := runningOn(ctx, kube, "pdb-guarded"); err != nil || len(nodes) != 1 || nodes[0] != guardedNode {
		t.Fatalf("the guarded pod moved (on %v, %v) while its PDB allowed no disruption; events %q", nodes, err, blocked)
	}
	// `nodewright explain node` against the live cluster says the same.
	e, err := operator.ExplainNode(ctx, cp.Config, operator.Config{InstanceTypes: mergeCatalog(t)}, guardedNode)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Verdict, "it stays: PodDisruptionBudget default/pdb-guarded allows 0 disruptions") || e.NodePool != "pdb" {
		t.Errorf("explain node %s: pool %s, verdict %q: want it held by the PDB", guardedNode, e.NodePool, e.Verdict)
	}
	one := intstr.FromInt32(1)
	if err := kube.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
		t.Fatal(err)
	}
	pdb.Spec.MaxUnavailable = &one
	if err := kube.Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, 2*time.Minute, "the guarded node consolidated once the PDB allows it", func(ctx context.Context) (bool, error) {
		var node corev1.Node
		err := kube.Get(ctx, client.ObjectKey{Name: guardedNode}, &node)
		if client.IgnoreNotFound(err) != nil {
			return false, err
		}
		nodes, err := runningOn(ctx, kube, "pdb-guarded")
		return err == nil && len(nodes) == 1 && nodes[0] != guardedNode, err
	})
}

// A budget of zero inside a schedule window holds an empty node; once the
// window is elsewhere in the day, the node goes.
func TestBudgetScheduleWindowBlocksThenAllows(t *testing.T) {
	ctx := context.Background()
	kube := startControllers(t, mergeCatalog(t))
	ensureNodeClass(ctx, t, kube)
	np := zonalPool("window", "small")
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
	always := "0 0 * * *" // from midnight, for 24 h: now, whenever now is
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Schedule: &always, Duration: &metav1.Duration{Duration: 24 * time.Hour}}}
	create(ctx, t, kube, np)
	pod := zoneAPod("window-pod", "window")
	create(ctx, t, kube, pod)
	waitFor(ctx, t, time.Minute, "the pod running", func(ctx context.Context) (bool, error) {
		err := kube.Get(ctx, client.ObjectKeyFromObject(pod), pod)
		return pod.Status.Phase == corev1.PodRunning, err
	})
	claims, err := claimsOf(ctx, kube, "window")
	if err != nil || len(claims) != 1 {
		t.Fatalf("nodeclaims %d (%v): want one", len(claims), err)
	}
	claim := claims[0]
	if err := kube.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	// Empty, consolidatable, but the window's budget allows 0.
	time.Sleep(40 * time.Second)
	if gone(ctx, kube, &claim) || claim.DeletionTimestamp != nil {
		t.Fatal("the empty node went inside a window whose budget allows 0")
	}
	// The window moves two hours ahead of now: outside it, no budget is
	// active and the node may go.
	if err := kube.Get(ctx, client.ObjectKeyFromObject(np), np); err != nil {
		t.Fatal(err)
	}
	later := fmt.Sprintf("0 %d * * *", (time.Now().UTC().Hour()+2)%24)
	np.Spec.Disruption.Budgets[0].Schedule, np.Spec.Disruption.Budgets[0].Duration = &later, &metav1.Duration{Duration: time.Hour}
	if err := kube.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, 2*time.Minute, "the empty node removed outside the window", func(ctx context.Context) (bool, error) {
		return gone(ctx, kube, &claim), nil
	})
}

// Changing the NodePool's template labels drifts its nodes; they are
// replaced one at a time (budget 1), each replacement up before the old
// node is drained, until every pod runs on a node with the new labels.
func TestTemplateChangeDriftsAndReplacesWithinTheBudget(t *testing.T) {
	ctx := context.Background()
	kube := startControllers(t, mergeCatalog(t))
	ensureNodeClass(ctx, t, kube)
	np := zonalPool("drift", "small")
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
	create(ctx, t, kube, np, app("drift-app", "drift", "1200m", 3))
	waitFor(ctx, t, 2*time.Minute, "three pods running on three nodes", func(ctx context.Context) (bool, error) {
		nodes, err := runningOn(ctx, kube, "drift-app")
		return len(nodes) == 3, err
	})
	original, err := claimsOf(ctx, kube, "drift")
	if err != nil || len(original) != 3 {
		t.Fatalf("nodeclaims %d (%v): want three", len(original), err)
	}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(np), np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Template.ObjectMeta.Labels["rev"] = "2"
	if err := kube.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	sawDrifted, most := false, 0
	waitFor(ctx, t, 4*time.Minute, "every node replaced by one with the new labels, pods running there", func(ctx context.Context) (bool, error) {
		disrupting, left := 0, 0
		for i := range original {
			nc := &karpv1.NodeClaim{}
			if err := kube.Get(ctx, client.ObjectKeyFromObject(&original[i]), nc); err != nil {
				if client.IgnoreNotFound(err) != nil {
					return false, err
				}
				continue
			}
			left++
			sawDrifted = sawDrifted || meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeDrifted)
			var node corev1.Node
			tainted := false
			if nc.Status.NodeName != "" && kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, &node) == nil {
				tainted = slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) })
			}
			if nc.DeletionTimestamp != nil || tainted {
				disrupting++
			}
		}
		most = max(most, disrupting)
		if left > 0 {
			return false, nil
		}
		nodes, err := runningOn(ctx, kube, "drift-app")
		if err != nil || len(nodes) != 3 {
			return false, err
		}
		for _, name := range nodes {
			var node corev1.Node
			if err := kube.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil || node.Labels["rev"] != "2" {
				return false, err
			}
		}
		return true, nil
	})
	if !sawDrifted {
		t.Error("no original NodeClaim was seen with Drifted=True")
	}
	if most > 1 {
		t.Errorf("%d drifted nodes were disrupted at once: the budget allows 1", most)
	}
	if n := metricValue(t, "karpenter_nodeclaims_disrupted_total", map[string]string{"nodepool": "drift", "reason": "drifted"}); n != 3 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{nodepool=drift,reason=drifted} = %v, want 3", n)
	}
}

// A node older than expireAfter is deleted whatever the budgets; its pod
// gets a new node.
func TestExpireAfterReplacesOldNodes(t *testing.T) {
	ctx := context.Background()
	kube := startControllers(t, mergeCatalog(t))
	ensureNodeClass(ctx, t, kube)
	np := zonalPool("expire", "small")
	np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("30s")
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
	create(ctx, t, kube, np, app("expire-app", "expire", "500m", 1))
	var first []string
	waitFor(ctx, t, time.Minute, "the pod running", func(ctx context.Context) (bool, error) {
		nodes, err := runningOn(ctx, kube, "expire-app")
		first = nodes
		return len(nodes) == 1, err
	})
	claims, err := claimsOf(ctx, kube, "expire")
	if err != nil || len(claims) != 1 {
		t.Fatalf("nodeclaims %d (%v): want one", len(claims), err)
	}
	// The test holds the NodeClaim with a finalizer of its own, so its
	// deletion time is always seen however fast the node goes.
	const hold = "test.nodewright.io/hold"
	old := claims[0]
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(&old), &old); err != nil {
			return err
		}
		patch := client.MergeFromWithOptions(old.DeepCopy(), client.MergeFromWithOptimisticLock{})
		old.Finalizers = append(old.Finalizers, hold)
		return kube.Patch(ctx, &old, patch)
	})
	if err != nil {
		t.Fatalf("holding nodeclaim %s: %v", old.Name, err)
	}
	var goneAt time.Time
	waitFor(ctx, t, 2*time.Minute, "the expired node replaced, the pod running on the new one", func(ctx context.Context) (bool, error) {
		if goneAt.IsZero() {
			var now karpv1.NodeClaim
			if err := kube.Get(ctx, client.ObjectKeyFromObject(&old), &now); err != nil {
				return false, err
			}
			if now.DeletionTimestamp == nil {
				return false, nil
			}
			patch := client.MergeFromWithOptions(now.DeepCopy(), client.MergeFromWithOptimisticLock{})
			now.Finalizers = slices.DeleteFunc(now.Finalizers, func(f string) bool { return f == hold })
			if err := kube.Patch(ctx, &now, patch); err != nil {
				if apierrors.IsConflict(err) {
					return false, nil
				}
				return false, err
			}
			goneAt = now.DeletionTimestamp.Time
		}
		if !gone(ctx, kube, &old) {
			return false, nil
		}
		nodes, err := runningOn(ctx, kube, "expire-app")
		return err == nil && len(nodes) == 1 && nodes[0] != first[0], err
	})
	if lived := goneAt.Sub(old.CreationTimestamp.Time); goneAt.IsZero() || lived < 29*time.Second {
		t.Errorf("the NodeClaim was deleted %s after its creation (seen: %v), before expireAfter (30s)", lived, !goneAt.IsZero())
	}
	if n := metricValue(t, "karpenter_nodeclaims_disrupted_total", map[string]string{"nodepool": "expire", "reason": "expired"}); n < 1 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{nodepool=expire,reason=expired} = %v, want at least 1", n)
	}
}
