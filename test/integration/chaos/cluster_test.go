//go:build integration

package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/operator"
)

// namespace holds the tests' Deployments.
const namespace = "default"

// adminClient is an uncached client of the control plane.
func adminClient(t *testing.T) client.Client {
	t.Helper()
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	crlog.SetLogger(logr.Discard()) // the client's own logs say nothing a test needs
	kube, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return kube
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

// app is a Deployment of replicas pods of cpu each, labelled app=group,
// placed on nodes labelled node-type=nodeType.
func app(name, group, nodeType, cpu string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": group, "tier": name}
	grace := int64(0)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector:                  map[string]string{"node-type": nodeType},
				TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
			}}},
	}
}

// scale sets a Deployment's replicas.
func scale(ctx context.Context, t *testing.T, kube client.Client, name string, replicas int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, d); err != nil {
			return err
		}
		d.Spec.Replicas = &replicas
		return kube.Update(ctx, d)
	})
	if err != nil {
		t.Fatalf("scaling deployment %s to %d: %v", name, replicas, err)
	}
}

// managedLists are the kinds a run leaves behind (NodeClasses aside).
func managedLists() []client.ObjectList {
	return []client.ObjectList{&appsv1.DeploymentList{}, &corev1.PodList{}, &karpv1.NodeClaimList{}, &corev1.NodeList{}, &karpv1.NodePoolList{}}
}

// settle waits (at most timeout) until done finds nothing left to wait
// for, reading the cluster every second, and returns the last state read
// and what was still awaited (nil when it settled). The controller exiting
// by itself fails the test.
func settle(ctx context.Context, t *testing.T, what string, timeout time.Duration, read func(context.Context) (*clusterState, error),
	done func(*clusterState) []string, ctrl *child) (*clusterState, []string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *clusterState
	for {
		var why []string
		s, err := read(ctx)
		if err == nil {
			last = s
			if why = done(s); len(why) == 0 {
				return s, nil
			}
		} else {
			why = []string{"reading the cluster: " + err.Error()}
		}
		if ctrl.exited() {
			t.Fatalf("%s: the controller exited by itself:\n%s", what, ctrl.tail(40))
		}
		if time.Now().After(deadline) {
			if last == nil {
				t.Fatalf("%s: no state read within %s: %v", what, timeout, why)
			}
			return last, why
		}
		time.Sleep(time.Second)
	}
}
