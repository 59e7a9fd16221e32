package simulator

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/examples"
	cdisruption "github.com/nodewright/nodewright/internal/controller/disruption"
	"github.com/nodewright/nodewright/internal/controller/garbagecollection"
	"github.com/nodewright/nodewright/internal/manifest"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	"github.com/nodewright/nodewright/providers/aws/fake"
)

// invariantPool is a kwok NodePool whose nodes hold about two 1-CPU pods
// each (so a few pods make a few nodes); extra is appended to its spec.
func invariantPool(extra string) string {
	return `
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
` + extra
}

// invariantDeployment is a Deployment of replicas 1-CPU pods; annotations
// go on its pods.
func invariantDeployment(name string, replicas int, annotations string) string {
	return `
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `}
spec:
  replicas: ` + strconv.Itoa(replicas) + `
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}, annotations: {` + annotations + `}}
    spec:
      terminationGracePeriodSeconds: 30
      containers: [{name: app, image: nginx, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`
}

// invariantEngine loads manifests into an engine running for d.
func invariantEngine(t *testing.T, manifests string, d time.Duration) *Engine {
	t.Helper()
	set := &manifest.Set{}
	if err := set.Add("test.yaml", []byte(manifests)); err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{InstanceTypes: defaultCatalog(t), Duration: d, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Load(context.Background(), &Input{Initial: set}); err != nil {
		t.Fatal(err)
	}
	return e
}

func run(t *testing.T, e *Engine) *Report {
	t.Helper()
	rep, err := e.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// violated returns the report's violations of one invariant.
func violated(rep *Report, invariant string) []Violation {
	var out []Violation
	for _, v := range rep.Violations {
		if v.Invariant == invariant {
			out = append(out, v)
		}
	}
	return out
}

// expectViolation asserts that the invariant was reported, first within
// [from, to] of simulated time, naming object, with a timeline and the
// replay command, and returns it.
func expectViolation(t *testing.T, rep *Report, invariant string, from, to time.Duration, object string) Violation {
	t.Helper()
	vs := violated(rep, invariant)
	if len(vs) == 0 {
		t.Fatalf("no %s violation reported; violations: %+v", invariant, rep.Violations)
	}
	v := vs[0]
	if at := time.Duration(v.At); at < from || at > to {
		t.Errorf("%s reported at %s, want between %s and %s: %s", invariant, at, from, to, v.Message)
	}
	if object != "" && !slices.Contains(v.Objects, object) {
		t.Errorf("%s violation names %v, want %s among them: %s", invariant, v.Objects, object, v.Message)
	}
	if len(v.Timeline) == 0 || !strings.Contains(v.Replay, "--seed 1") {
		t.Errorf("%s violation without a timeline or replay command: %+v", invariant, v)
	}
	return v
}

func expectNoViolation(t *testing.T, rep *Report, invariants ...string) {
	t.Helper()
	for _, v := range rep.Violations {
		if len(invariants) == 0 || slices.Contains(invariants, v.Invariant) {
			t.Errorf("violation %s at %s: %s\n  %s", v.Invariant, time.Duration(v.At), v.Message, strings.Join(v.Timeline, "\n  "))
		}
	}
}

// list returns every object of a kind, sorted by name.
func listClaims(t *testing.T, e *Engine) []karpv1.NodeClaim {
	t.Helper()
	claims := &karpv1.NodeClaimList{}
	if err := e.store.List(context.Background(), claims); err != nil {
		t.Fatal(err)
	}
	return claims.Items
}

func boundPods(t *testing.T, e *Engine, app string) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := e.store.List(context.Background(), pods, client.MatchingLabels{"app": app}); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// The examples keep every invariant: the quickstart, and the seed on the
// kwok and the AWS provider (spot interruptions, consolidation).
func TestExamplesKeepEveryInvariant(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		opts       Options
	}{
		{"quickstart", examples.Quickstart, Options{Seed: 1}},
		{"seed", "seed/scenario.yaml", Options{Seed: 1}},
		{"seed on aws", "seed/scenario.yaml", Options{Seed: 1, CloudProvider: "aws"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := runExample(t, tc.path, tc.opts)
			if rep.Violations == nil {
				t.Error("violations is nil, want an empty list")
			}
			expectNoViolation(t, rep)
		})
	}
}

// A second instance launched for a NodeClaim (a launch whose answer was
// lost, retried) is reported at once; garbage collection then terminates
// it, so it is not reported as an instance without a NodeClaim.
func TestInvariantOneInstancePerNodeClaim(t *testing.T) {
	in, err := LoadFS(examples.FS, "seed/scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Seed: 1, CloudProvider: "aws", InstanceTypes: defaultCatalog(t), Duration: 15 * time.Minute, BootDelay: 45 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Load(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	var claim string
	e.At(10*time.Minute, func() error {
		nc := listClaims(t, e)[0]
		claim = nc.Name
		e.aws.AddInstance(fake.Instance{InstanceType: nc.Labels[corev1.LabelInstanceTypeStable], Zone: nc.Labels[corev1.LabelTopologyZone],
			CapacityType: nc.Labels[karpv1.LabelCapacityType], Tags: map[string]string{tagNodeClaim: nc.Name,
				karpv1.LabelNodePool: nc.Labels[karpv1.LabelNodePool], "kubernetes.io/cluster/demo": "owned"}})
		return nil
	})
	rep := run(t, e)
	v := expectViolation(t, rep, InvariantOneInstance, 10*time.Minute, 10*time.Minute, "nodeclaim/"+claim)
	if !strings.Contains(v.Message, "2 live instances") {
		t.Errorf("message %q: want the two instances counted", v.Message)
	}
	expectNoViolation(t, rep, InvariantNoOrphanInstance)
}

// blindProvider hides every instance from garbage collection.
type blindProvider struct{ cloudprovider.CloudProvider }

func (blindProvider) List(context.Context) ([]*karpv1.NodeClaim, error) { return nil, nil }

// An instance no NodeClaim owns is reported once garbage collection has
// had its grace (MinInstanceAge, then a slow round) and not terminated
// it; with garbage collection working it is terminated in time.
func TestInvariantNoInstanceWithoutNodeClaim(t *testing.T) {
	for _, tc := range []struct {
		name  string
		blind bool
	}{{"garbage collection blind", true}, {"garbage collection working", false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := invariantEngine(t, invariantPool("")+invariantDeployment("web", 2, ""), 12*time.Minute)
			if tc.blind {
				e.components.GarbageCollector = garbagecollection.New(e.store, blindProvider{e.components.KWOK}, e.clock,
					garbagecollection.MinInstanceAge, logr.Discard(), nil)
			}
			e.At(5*time.Minute, func() error {
				return e.store.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "stray"},
					Spec: corev1.NodeSpec{ProviderID: "kwok://stray"}})
			})
			rep := run(t, e)
			if !tc.blind {
				expectNoViolation(t, rep)
				return
			}
			// Collectable at 5m30s, a slow round and a check later.
			due := 5*time.Minute + garbagecollection.MinInstanceAge + orphanSlack
			expectViolation(t, rep, InvariantNoOrphanInstance, due, due+checkEvery, "node/stray")
		})
	}
}

// A NodeClaim whose launched capacity takes its pool above spec.limits is
// reported when it happens.
func TestInvariantNodePoolLimits(t *testing.T) {
	e := invariantEngine(t, invariantPool("  limits: {cpu: \"8\"}\n")+invariantDeployment("web", 2, ""), 10*time.Minute)
	var claim string
	e.At(5*time.Minute, func() error {
		nc := listClaims(t, e)[0]
		claim = nc.Name
		nc.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("64")
		return e.store.Status().Update(context.Background(), &nc)
	})
	rep := run(t, e)
	v := expectViolation(t, rep, InvariantLimits, 5*time.Minute, 5*time.Minute, "nodeclaim/"+claim)
	if !strings.Contains(v.Message, "above its limit 8") {
		t.Errorf("message %q: want the limit named", v.Message)
	}
}

// Evicting a do-not-disrupt pod, or a Nodewright controller deleting a pod
// its PodDisruptionBudget protects, is reported; the forced deletion of a
// do-not-disrupt pod at its node's terminationGracePeriod deadline (an
// expired node) is not.
func TestInvariantEvictions(t *testing.T) {
	ctx := context.Background()
	t.Run("do-not-disrupt pod evicted", func(t *testing.T) {
		e := invariantEngine(t, invariantPool("")+invariantDeployment("keep", 2, `karpenter.sh/do-not-disrupt: "true"`), 10*time.Minute)
		var pod string
		e.At(5*time.Minute, func() error {
			p := boundPods(t, e, "keep")[0]
			pod = podKey(p.Namespace, p.Name)
			return e.store.SubResource("eviction").Create(ctx, &p, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
		})
		rep := run(t, e)
		expectViolation(t, rep, InvariantEvictions, 5*time.Minute, 5*time.Minute, pod)
	})
	t.Run("pod of a full budget deleted by termination", func(t *testing.T) {
		pdb := "\n---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\nspec:\n  minAvailable: 3\n  selector: {matchLabels: {app: web}}\n"
		e := invariantEngine(t, invariantPool("")+invariantDeployment("web", 3, "")+pdb, 10*time.Minute)
		var pod string
		e.At(5*time.Minute, func() error {
			p := boundPods(t, e, "web")[0]
			pod = podKey(p.Namespace, p.Name)
			e.actor = "node.termination"
			return e.store.Delete(ctx, &p)
		})
		rep := run(t, e)
		v := expectViolation(t, rep, InvariantEvictions, 5*time.Minute, 5*time.Minute, pod)
		if !strings.Contains(v.Message, "poddisruptionbudget web with 2 healthy pods where it keeps 3") {
			t.Errorf("message %q: want the budget and its counts", v.Message)
		}
	})
	t.Run("do-not-disrupt pod deleted at the deadline", func(t *testing.T) {
		pool := invariantPool("      expireAfter: 10m\n      terminationGracePeriod: 3m\n")
		e := invariantEngine(t, pool+invariantDeployment("keep", 1, `karpenter.sh/do-not-disrupt: "true"`), 20*time.Minute)
		first := ""
		e.At(time.Minute, func() error {
			first = boundPods(t, e, "keep")[0].Name
			return nil
		})
		rep := run(t, e)
		expectNoViolation(t, rep)
		if now := boundPods(t, e, "keep"); len(now) != 1 || now[0].Name == first {
			t.Errorf("pods bound at the end %v: want the first (%s) forced out at the deadline and replaced", now, first)
		}
	})
}

// The disruption loop deleting a candidate whose replacement is not
// initialized yet is reported.
func TestInvariantReplacementsInitializedBeforeDelete(t *testing.T) {
	e := invariantEngine(t, invariantPool("")+invariantDeployment("web", 2, ""), 10*time.Minute)
	var candidate string
	e.At(5*time.Minute, func() error {
		ctx := context.Background()
		nc := listClaims(t, e)[0]
		candidate = nc.Name
		replacement := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "replacement-1", Labels: map[string]string{karpv1.LabelNodePool: "default"}},
			Spec: *nc.Spec.DeepCopy()}
		if err := e.store.Create(ctx, replacement); err != nil {
			return err
		}
		nc.Annotations = map[string]string{cdisruption.ReplacementsAnnotation: "replacement-1"}
		if err := e.store.Update(ctx, &nc); err != nil {
			return err
		}
		e.actor = actorDisruption
		return e.store.Delete(ctx, &nc)
	})
	rep := run(t, e)
	v := expectViolation(t, rep, InvariantReplaceFirst, 5*time.Minute, 5*time.Minute, "nodeclaim/replacement-1")
	if !strings.Contains(v.Message, "deleted nodeclaim "+candidate+" while its replacement replacement-1 is not initialized") {
		t.Errorf("message %q: want the candidate and its uninitialized replacement", v.Message)
	}
}

// A disrupted taint that no decision holds (here: the disruption loop has
// stopped, so nothing removes it) is reported after the grace.
func TestInvariantNoStrayDisruptedTaint(t *testing.T) {
	e := invariantEngine(t, invariantPool("")+invariantDeployment("web", 2, ""), 10*time.Minute)
	var node string
	e.At(5*time.Minute, func() error {
		e.nextDisruption = e.opts.Start.Add(24 * time.Hour) // the loop hangs
		n := &corev1.Node{}
		node = listClaims(t, e)[0].Status.NodeName
		if err := e.store.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		n.Spec.Taints = append(n.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
		return e.store.Update(context.Background(), n)
	})
	rep := run(t, e)
	expectViolation(t, rep, InvariantNoStrayTaint, 5*time.Minute+TaintGrace, 5*time.Minute+TaintGrace+checkEvery, "node/"+node)
}

// More NodeClaims voluntarily disrupting at once than the pool's budget
// allows is reported when it happens.
func TestInvariantDisruptionBudgets(t *testing.T) {
	pool := invariantPool("  disruption:\n    budgets: [{nodes: \"1\"}]\n")
	e := invariantEngine(t, pool+invariantDeployment("web", 6, ""), 10*time.Minute)
	e.At(5*time.Minute, func() error {
		for _, nc := range listClaims(t, e)[:2] {
			nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
				Reason: string(karpv1.DisruptionReasonUnderutilized), LastTransitionTime: metav1.NewTime(e.Now())})
			if err := e.store.Status().Update(context.Background(), &nc); err != nil {
				return err
			}
		}
		return nil
	})
	rep := run(t, e)
	v := expectViolation(t, rep, InvariantBudgets, 5*time.Minute, 5*time.Minute, "nodepool/default")
	if !strings.Contains(v.Message, "2 nodeclaims of nodepool default disrupting at once") || !strings.Contains(v.Message, "for Underutilized") ||
		!strings.Contains(v.Message, "allow 1") {
		t.Errorf("message %q: want the count and the budget", v.Message)
	}
}

// Pods a NodePool can take that stay pending (here the kubelet is dead,
// so the nodes bought for them never turn Ready) are reported after
// PendingBound; a pod no NodePool can take is not.
func TestInvariantSchedulablePodsBound(t *testing.T) {
	t.Run("nodes never Ready", func(t *testing.T) {
		e := invariantEngine(t, invariantPool("")+invariantDeployment("web", 2, ""), 20*time.Minute)
		for i, c := range e.controllers {
			if strings.HasPrefix(c.Name, "kwok.kubelet") {
				e.controllers[i].Reconciler = reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
			}
		}
		rep := run(t, e)
		v := expectViolation(t, rep, InvariantPodsBound, PendingBound, PendingBound+pendingEvery, "")
		if !strings.Contains(v.Message, "2 pod(s) of default/deployment/web ") {
			t.Errorf("message %q: want the web pods counted by owner", v.Message)
		}
	})
	t.Run("no pool can take it", func(t *testing.T) {
		huge := strings.Replace(invariantDeployment("huge", 1, ""), `cpu: "1"`, `cpu: "1000"`, 1)
		e := invariantEngine(t, invariantPool("")+huge, 20*time.Minute)
		rep := run(t, e)
		if rep.Summary.PodsPendingAtEnd != 1 {
			t.Fatalf("%d pods pending at the end, want the huge one", rep.Summary.PodsPendingAtEnd)
		}
		expectNoViolation(t, rep)
	})
}
