//go:build integration

// Package conformance_test plays conformance cases on the real control
// plane: the manifests are applied, Nodewright's controllers (kwok
// provider, the fake-provider-shaped catalog of test/conformance) decide
// live, kube-scheduler binds, and the NodeClaims launched must be the ones
// `nodewright plan` decides for the same manifests.
package conformance_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/manifest"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/internal/plan"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/test/conformance"
	"github.com/nodewright/nodewright/test/integration/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{ControllerManager: true, Scheduler: true}, &cp))
}

// liveCases: several themes at once, one provisioning window (the pods
// are created together), so plan's single decision is comparable.
const liveCases = `
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
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
---
# Theme 1: limits only; 3 CPU fit default-instance-type, not small.
apiVersion: v1
kind: Pod
metadata: {name: limits-only, namespace: default}
spec:
  nodeSelector: {kubernetes.io/arch: amd64}
  containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {limits: {cpu: "3", memory: 1Gi}}}]
---
# Theme 6: special is defined on the large type only.
apiVersion: v1
kind: Pod
metadata: {name: exists, namespace: default}
spec:
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: special, operator: Exists}]}]}}}
  containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 100m}}}]
---
# Theme 3: a chain of zone affinities to a zone-pinned pod.
apiVersion: v1
kind: Pod
metadata: {name: db, namespace: default, labels: {app: db}}
spec:
  nodeSelector: {topology.kubernetes.io/zone: test-zone-3}
  containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 100m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: db}}}]}}
  containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 100m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: cache, namespace: default, labels: {app: cache}}
spec:
  affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: web}}}]}}
  containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 100m}}}]
`

func TestLiveDecisionsMatchPlan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	types := conformance.FakeCatalog()

	// What plan decides (its pods are pending and marked Unschedulable).
	set := &manifest.Set{}
	if err := set.Add("live.yaml", []byte(liveCases)); err != nil {
		t.Fatal(err)
	}
	in, _ := plan.Input(set, types)
	in.MinValuesPolicy = sched.MinValuesStrict
	want := sched.Solve(in)
	if len(want.Unschedulable) != 0 {
		t.Fatalf("plan leaves pods unschedulable: %+v", want.Unschedulable)
	}

	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- operator.Run(runCtx, cp.Config, operator.Config{
			CloudProvider: "kwok", KWOKKubelet: true, RegistrationDelay: time.Second, InstanceTypes: types,
			BatchIdle: 2 * time.Second, BatchMax: 10 * time.Second, MinValuesPolicy: sched.MinValuesStrict,
			MetricsAddr: "0", HealthAddr: "0", Logger: logr.Discard(), Embedded: true,
		})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("controllers: %v", err)
		}
	})

	// The pool and class first, Ready before the pods come, so one window
	// sees every pod.
	objs := decode(t, scheme, liveCases)
	var pods []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
			continue
		}
		if err := kube.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	poll(ctx, t, "the NodePool to be Ready", func(ctx context.Context) (bool, error) {
		np := &karpv1.NodePool{}
		if err := kube.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(np.Status.Conditions, karpv1.ConditionTypeReady), nil
	})
	for _, p := range pods {
		if err := kube.Create(ctx, p); err != nil {
			t.Fatalf("creating pod %s: %v", p.Name, err)
		}
	}

	// Every pod runs; the NodeClaims launched are plan's, type for type.
	poll(ctx, t, "every pod to be bound", func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		if err := kube.List(ctx, &list, client.InNamespace("default")); err != nil {
			return false, err
		}
		bound := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == len(pods), nil
	})
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims); err != nil {
		t.Fatal(err)
	}
	var got, planned []string
	for _, nc := range claims.Items {
		got = append(got, nc.Labels[corev1.LabelInstanceTypeStable]+"/"+nc.Labels[corev1.LabelTopologyZone])
	}
	for _, nc := range want.NodeClaims {
		planned = append(planned, nc.InstanceType+"/"+nc.Zone)
	}
	slices.Sort(got)
	slices.Sort(planned)
	if !slices.Equal(got, planned) {
		t.Errorf("live NodeClaims (type/zone) %v, plan decides %v", got, planned)
	}

	// Where the pods run: the chain in test-zone-3, the limits-only pod
	// off small-instance-type, the Exists pod on arm-instance-type.
	nodeOf := map[string]*corev1.Node{}
	var nodes corev1.NodeList
	if err := kube.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		nodeOf[nodes.Items[i].Name] = &nodes.Items[i]
	}
	for _, p := range pods {
		live := &corev1.Pod{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(p), live); err != nil {
			t.Fatal(err)
		}
		n := nodeOf[live.Spec.NodeName]
		if n == nil {
			t.Errorf("pod %s on unknown node %q", p.Name, live.Spec.NodeName)
			continue
		}
		typ, zone := n.Labels[corev1.LabelInstanceTypeStable], n.Labels[corev1.LabelTopologyZone]
		switch p.Name {
		case "db", "web", "cache":
			if zone != "test-zone-3" {
				t.Errorf("pod %s runs in %s, want test-zone-3 (the db it follows)", p.Name, zone)
			}
		case "limits-only":
			if typ == "small-instance-type" {
				t.Errorf("the limits-only pod runs on %s, which cannot hold its 3 CPU", typ)
			}
		case "exists":
			if typ != "arm-instance-type" {
				t.Errorf("the Exists pod runs on %s, want arm-instance-type", typ)
			}
		}
	}
}

// decode reads the YAML documents into typed objects of the scheme.
func decode(t *testing.T, scheme *runtime.Scheme, docs string) []client.Object {
	t.Helper()
	deserializer := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(docs)))
	var out []client.Object
	for {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		obj, _, err := deserializer.Decode(raw, nil, nil)
		if err != nil {
			t.Fatalf("decoding %s: %v", raw, err)
		}
		out = append(out, obj.(client.Object))
	}
}

func poll(ctx context.Context, t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
