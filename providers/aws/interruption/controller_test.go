package interruption_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/termination"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/providers/aws/fake"
	"github.com/nodewright/nodewright/providers/aws/interruption"
)

type replacer struct {
	calls [][]string
	made  []*karpv1.NodeClaim
}

func (r *replacer) ProvisionFor(_ context.Context, node string, pods []*corev1.Pod) ([]*karpv1.NodeClaim, error) {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	r.calls = append(r.calls, append([]string{node}, names...))
	return r.made, nil
}

type marks []string

func (m *marks) MarkUnavailable(instanceType, zone, capacityType string) {
	*m = append(*m, instanceType+"/"+zone+"/"+capacityType)
}

// env: a fake AWS with one running spot instance whose NodeClaim, Node
// and two pods (one a DaemonSet's) exist.
type env struct {
	fake     *fake.Server
	api      client.WithWatch // the API server's state, never faulty
	kube     client.Client    // what the controller talks to
	ctrl     *interruption.Controller
	replacer *replacer
	marks    *marks
	recorder *record.FakeRecorder // the current controller's
	clock    *clocktesting.FakeClock
	url      string
	instance string
}

// indexer registers a controller's field indexes on a fake client.
type indexer struct{ b *crfake.ClientBuilder }

func (i indexer) IndexField(_ context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	i.b.WithIndex(obj, field, extract)
	return nil
}

// newEnv builds the env; funcs, when given, intercept the controller's
// API calls.
func newEnv(t *testing.T, funcs ...interceptor.Funcs) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	all, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	f, err := fake.New(fake.Options{World: fake.DefaultWorld("demo"), InstanceTypes: all[:40], Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	id := f.AddInstance(fake.Instance{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"})
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "spot-1", Finalizers: []string{karpv1.TerminationFinalizer},
		Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1a", karpv1.LabelCapacityType: "spot"}}}
	nc.Status.ProviderID, nc.Status.NodeName = "aws:///us-east-1a/"+id, "node-1"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}}
	app := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "node-1"}}
	ds := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", Controller: new(true)}}}, Spec: corev1.PodSpec{NodeName: "node-1"}}
	b := crfake.NewClientBuilder().WithScheme(s).WithObjects(nc, node, app, ds)
	for _, index := range []func(context.Context, client.FieldIndexer) error{termination.IndexFields, interruption.IndexFields} {
		if err := index(context.Background(), indexer{b}); err != nil {
			t.Fatal(err)
		}
	}
	api := b.Build()
	var kube client.Client = api
	for _, fn := range funcs {
		kube = interceptor.NewClient(api, fn)
	}
	e := &env{fake: f, api: api, kube: kube, replacer: &replacer{}, marks: &marks{}, clock: clk,
		url: "https://sqs.us-east-1.amazonaws.com/111122223333/demo", instance: id}
	e.ctrl = e.restart()
	return e
}

// restart is a fresh controller on the same API, cloud and clock, as after
// a process restart: nothing of the old one's memory is left.
func (e *env) restart() *interruption.Controller {
	e.recorder = record.NewFakeRecorder(100)
	e.ctrl = interruption.New(e.kube, sqs.NewFromConfig(fake.InProcessConfig(e.fake)), e.replacer, e.marks, e.recorder, nil, e.clock,
		logr.Discard(), interruption.Options{Queue: "demo", ShortPoll: true}).WithAPIReader(e.api)
	return e.ctrl
}

func (e *env) claimGone(t *testing.T) bool {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	err := e.kube.Get(context.Background(), client.ObjectKey{Name: "spot-1"}, nc)
	return err == nil && nc.DeletionTimestamp != nil || client.IgnoreNotFound(err) == nil && err != nil
}

// replacement makes a NodeClaim the replacer hands back, not initialized.
func (e *env) replacement(t *testing.T) *karpv1.NodeClaim {
	t.Helper()
	r := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "replacement-1"}}
	if err := e.kube.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	e.replacer.made = []*karpv1.NodeClaim{r}
	return r
}

func TestSpotInterruptionCordonsReplacesThenDeletes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.replacement(t)
	if err := e.fake.Send("demo", "spot-interruption", e.instance); err != nil {
		t.Fatal(err)
	}
	if err := e.ctrl.Poll(ctx, e.url); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*e.marks, []string{"m5.large/us-east-1a/spot"}) {
		t.Errorf("unavailable offerings %v, want the interrupted spot offering", *e.marks)
	}
	node := &corev1.Node{}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "node-1"}, node); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.TaintKeyDisrupted }) {
		t.Errorf("node taints %v: want it cordoned", node.Spec.Taints)
	}
	if len(e.replacer.calls) != 1 || !slices.Equal(e.replacer.calls[0], []string{"node-1", "app"}) {
		t.Errorf("replacement asked for %v, want node-1's app pod (not the DaemonSet's)", e.replacer.calls)
	}
	if e.fake.QueueDepth("demo") != 0 {
		t.Error("the message was not deleted")
	}
	if e.claimGone(t) {
		t.Fatal("the NodeClaim was deleted before its replacement or the deadline")
	}
	// Once the replacement is initialized, the interrupted NodeClaim goes.
	e.clock.Step(20 * time.Second)
	if err := e.ctrl.Poll(ctx, e.url); err != nil || e.claimGone(t) {
		t.Fatalf("before the replacement is up: gone %v, %v", e.claimGone(t), err)
	}
	r.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.Now()}}
	if err := e.kube.Update(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := e.ctrl.Poll(ctx, e.url); err != nil {
		t.Fatal(err)
	}
	if !e.claimGone(t) {
		t.Error("the NodeClaim stayed after its replacement was up")
	}
}

func TestSpotInterruptionDeletesAtTheDeadlineWithoutReplacement(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.replacement(t) // never initialized
	if err := e.fake.Send("demo", "spot-interruption", e.instance); err != nil {
		t.Fatal(err)
	}
	if err := e.ctrl.Poll(ctx, e.url); err != nil || e.claimGone(t) {
		t.Fatalf("right after the warning: gone %v, %v", e.claimGone(t), err)
	}
	// 90 s after the warning, it goes whatever the replacements do.
	e.clock.Step(91 * time.Second)
	if err := e.ctrl.Poll(ctx, e.url); err != nil {
		t.Fatal(err)
	}
	if !e.claimGone(t) {
		t.Error("the NodeClaim outlived the spot warning's grace")
	}
}

func TestStateChangeDeletesAtOnceAndRebalanceDoesNothing(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if err := e.fake.Send("demo", "rebalance", e.instance); err != nil {
		t.Fatal(err)
	}
	if err := e.ctrl.Poll(ctx, e.url); err != nil {
		t.Fatal(err)
	}
	if e.claimGone(t) || len(e.replacer.calls) > 0 || len(*e.marks) > 0 || e.fake.QueueDepth("demo") != 0 {
		t.Fatalf("a rebalance recommendation acted: gone %v, replacements %v, marks %v, queue %d", e.claimGone(t), e.replacer.calls, *e.marks, e.fake.QueueDepth("demo"))
	}
	if err := e.fake.Send("demo", "stopping", e.instance); err != nil {
		t.Fatal(err)
	}
	if err := e.ctrl.Poll(ctx, e.url); err != nil {
		t.Fatal(err)
	}
	if !e.claimGone(t) || len(*e.marks) > 0 {
		t.Errorf("a stopping instance: NodeClaim deleted %v (want at once), marks %v (want none: not a spot interruption)", e.claimGone(t), *e.marks)
	}
}

var discard = logr.Discard()

func sqsClient(e *env) *sqs.Client { return sqs.NewFromConfig(fake.InProcessConfig(e.fake)) }
