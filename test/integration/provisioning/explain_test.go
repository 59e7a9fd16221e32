//go:build integration

package provisioning_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/internal/sched"
)

// `nodewright explain pod` on a live cluster: a pod too big for every
// instance type is pending, and each NodePool says why it cannot launch
// a node for it; a pod that runs is bound, and says where.
func TestExplainPodSaysWhyItIsPending(t *testing.T) {
	ctx := context.Background()
	types := testCatalog(t)
	kube := startControllers(t, types)
	ensureNodeClass(ctx, t, kube)
	open := zonalPool("explain", "c-2x-amd64-linux", "c-4x-amd64-linux", "c-8x-amd64-linux")
	tainted := zonalPool("explain-tainted", "c-8x-amd64-linux")
	tainted.Spec.Template.ObjectMeta.Labels["node-type"] = "explain"
	tainted.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	huge := zoneAPod("explain-huge", "explain")
	huge.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("64")
	small := zoneAPod("explain-small", "explain")
	create(ctx, t, kube, open, tainted, huge, small)

	explain := func(name string) string {
		t.Helper()
		e, err := operator.ExplainPod(ctx, cp.Config, operator.Config{InstanceTypes: types, MinValuesPolicy: sched.MinValuesStrict}, "default", name)
		if err != nil {
			t.Fatalf("explain pod %s: %v", name, err)
		}
		var b bytes.Buffer
		if err := e.Write(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	waitFor(ctx, t, 2*time.Minute, "the small pod running, the huge one unschedulable, both pools Ready", func(ctx context.Context) (bool, error) {
		var s, h corev1.Pod
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "explain-small"}, &s); err != nil {
			return false, err
		}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "explain-huge"}, &h); err != nil {
			return false, err
		}
		for _, name := range []string{"explain", "explain-tainted"} {
			np := &karpv1.NodePool{}
			if err := kube.Get(ctx, client.ObjectKey{Name: name}, np); err != nil || !slices.ContainsFunc(np.Status.Conditions, func(c metav1.Condition) bool {
				return c.Type == karpv1.ConditionTypeReady && c.Status == "True"
			}) {
				return false, err
			}
		}
		return s.Status.Phase == corev1.PodRunning && slices.ContainsFunc(h.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable
		}), nil
	})
	out := explain("explain-huge")
	for _, want := range []string{"Pod default/explain-huge: no NodePool can launch a node for it",
		"NodePool explain: no instance type", "enough cpu (requested 64)",
		"NodePool explain-tainted: taint dedicated=batch:NoSchedule not tolerated"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain pod explain-huge lacks %q:\n%s", want, out)
		}
	}
	if out := explain("explain-small"); !strings.Contains(out, "it is bound to node") || !strings.Contains(out, "NodePool explain") {
		t.Errorf("explain pod explain-small:\n%s", out)
	}
}
