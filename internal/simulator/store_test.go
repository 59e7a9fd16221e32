package simulator

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/operator"
)

type change struct {
	name    string
	deleted bool
}

func newTestStore(t *testing.T) (*store, *clocktesting.FakeClock, *[]change) {
	t.Helper()
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(DefaultStart)
	s := newStore(scheme, restMapper(scheme), clk, 1)
	var changes []change
	s.changed = func(obj client.Object, deleted bool) { changes = append(changes, change{obj.GetName(), deleted}) }
	return s, clk, &changes
}

// The store behaves as kube-apiserver does for what the controllers rely on.
func TestStoreSemantics(t *testing.T) {
	ctx := context.Background()

	t.Run("create stamps virtual time, generated names and UIDs", func(t *testing.T) {
		s, clk, changes := newTestStore(t)
		clk.Step(time.Hour)
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-"}}
		if err := s.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
		if len(nc.Name) != len("web-")+5 || nc.UID == "" || !nc.CreationTimestamp.Time.Equal(DefaultStart.Add(time.Hour)) || nc.ResourceVersion == "" {
			t.Errorf("created %q uid %q at %s rv %q", nc.Name, nc.UID, nc.CreationTimestamp, nc.ResourceVersion)
		}
		if err := s.Create(ctx, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}}); !apierrors.IsAlreadyExists(err) {
			t.Errorf("second create: %v, want AlreadyExists", err)
		}
		if len(*changes) != 1 {
			t.Errorf("changes %v, want the one create", *changes)
		}
	})

	t.Run("a stale resource version conflicts", func(t *testing.T) {
		s, _, _ := newTestStore(t)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
		if err := s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		stale := pod.DeepCopy()
		pod.Labels = map[string]string{"a": "1"}
		if err := s.Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
		stale.Labels = map[string]string{"a": "2"}
		if err := s.Update(ctx, stale); !apierrors.IsConflict(err) {
			t.Errorf("update from a stale copy: %v, want Conflict", err)
		}
		patch := client.MergeFromWithOptions(stale.DeepCopy(), client.MergeFromWithOptimisticLock{})
		stale.Labels["b"] = "3"
		if err := s.Patch(ctx, stale, patch); !apierrors.IsConflict(err) {
			t.Errorf("optimistic patch from a stale copy: %v, want Conflict", err)
		}
	})

	t.Run("status is written only through the status subresource; pods start Pending", func(t *testing.T) {
		s, _, _ := newTestStore(t)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
		if err := s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status.Phase = corev1.PodRunning
		pod.Spec.NodeName = "n1"
		if err := s.Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Pod{}
		if err := s.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != corev1.PodPending || got.Spec.NodeName != "n1" {
			t.Errorf("after update: phase %q node %q, want the spec written and the status not", got.Status.Phase, got.Spec.NodeName)
		}
		patch := client.MergeFrom(got.DeepCopy())
		got.Status.Phase = corev1.PodRunning
		got.Spec.NodeName = "n2"
		if err := s.Status().Patch(ctx, got, patch); err != nil {
			t.Fatal(err)
		}
		final := &corev1.Pod{}
		_ = s.Get(ctx, client.ObjectKeyFromObject(pod), final)
		if final.Status.Phase != corev1.PodRunning || final.Spec.NodeName != "n1" {
			t.Errorf("after status patch: phase %q node %q, want the status written and the spec not", final.Status.Phase, final.Spec.NodeName)
		}
	})

	t.Run("finalizers hold a deletion at its virtual time until removed", func(t *testing.T) {
		s, clk, changes := newTestStore(t)
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Finalizers: []string{karpv1.TerminationFinalizer}}}
		if err := s.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
		clk.Step(10 * time.Minute)
		if err := s.Delete(ctx, nc); err != nil {
			t.Fatal(err)
		}
		got := &karpv1.NodeClaim{}
		if err := s.Get(ctx, client.ObjectKey{Name: "c"}, got); err != nil {
			t.Fatal(err)
		}
		if got.DeletionTimestamp == nil || !got.DeletionTimestamp.Time.Equal(DefaultStart.Add(10*time.Minute)) {
			t.Fatalf("deletionTimestamp %v, want the virtual time of the delete", got.DeletionTimestamp)
		}
		patch := client.MergeFrom(got.DeepCopy())
		got.Finalizers = nil
		if err := s.Patch(ctx, got, patch); err != nil {
			t.Fatal(err)
		}
		if err := s.Get(ctx, client.ObjectKey{Name: "c"}, got); !apierrors.IsNotFound(err) {
			t.Errorf("after the last finalizer: %v, want NotFound", err)
		}
		if last := (*changes)[len(*changes)-1]; !last.deleted {
			t.Errorf("last change %+v, want the deletion reported", last)
		}
	})

	t.Run("lists are sorted and filtered by labels, namespace and index", func(t *testing.T) {
		s, _, _ := newTestStore(t)
		if err := s.IndexField(ctx, &corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }); err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct{ ns, name, node, app string }{{"b", "z", "n1", "web"}, {"a", "y", "n2", "web"}, {"a", "x", "n1", "db"}} {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns, Labels: map[string]string{"app": p.app}}, Spec: corev1.PodSpec{NodeName: p.node}}
			if err := s.Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
		}
		names := func(opts ...client.ListOption) string {
			var list corev1.PodList
			if err := s.List(ctx, &list, opts...); err != nil {
				t.Fatal(err)
			}
			out := ""
			for _, p := range list.Items {
				out += p.Namespace + "/" + p.Name + " "
			}
			return out
		}
		if got := names(); got != "a/x a/y b/z " {
			t.Errorf("all: %q", got)
		}
		if got := names(client.MatchingLabels{"app": "web"}); got != "a/y b/z " {
			t.Errorf("app=web: %q", got)
		}
		if got := names(client.InNamespace("a"), client.MatchingFields{"spec.nodeName": "n1"}); got != "a/x " {
			t.Errorf("a, on n1: %q", got)
		}
		var list corev1.PodList
		if err := s.List(ctx, &list, client.MatchingFields{"spec.unknown": "x"}); err == nil {
			t.Error("a list by a field with no index succeeded")
		}
	})

	t.Run("eviction deletes the pod unless refused", func(t *testing.T) {
		s, _, _ := newTestStore(t)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
		if err := s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		s.evictionAllowed = func(context.Context, client.Object) error {
			return apierrors.NewTooManyRequests("the disruption budget allows no disruption", 10)
		}
		if err := s.SubResource("eviction").Create(ctx, pod, nil); !apierrors.IsTooManyRequests(err) {
			t.Errorf("refused eviction: %v, want 429", err)
		}
		s.evictionAllowed = nil
		if err := s.SubResource("eviction").Create(ctx, pod, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Get(ctx, client.ObjectKeyFromObject(pod), pod); !apierrors.IsNotFound(err) {
			t.Errorf("after eviction: %v, want NotFound", err)
		}
	})
}

// Objects of Nodewright's CRDs get the CRDs' defaults, as from
// kube-apiserver: manifests written for Karpenter rely on them.
func TestStoreAppliesCRDDefaults(t *testing.T) {
	s, _, _ := newTestStore(t)
	var err error
	if s.defaults, err = loadCRDDefaults(); err != nil {
		t.Fatal(err)
	}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	if err := s.Create(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	got := &karpv1.NodePool{}
	if err := s.Get(context.Background(), client.ObjectKey{Name: "bare"}, got); err != nil {
		t.Fatal(err)
	}
	d := got.Spec.Disruption
	if d.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized || d.ConsolidateAfter.Duration == nil || *d.ConsolidateAfter.Duration != 0 ||
		len(d.Budgets) != 1 || d.Budgets[0].Nodes != "10%" {
		t.Errorf("disruption %+v (consolidateAfter %v): want Karpenter's defaults", d, d.ConsolidateAfter.Duration)
	}
	if ea := got.Spec.Template.Spec.ExpireAfter.Duration; ea == nil || *ea != 720*time.Hour {
		t.Errorf("expireAfter %v, want 720h", ea)
	}
}
