//go:build integration

package chart_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// forbidden collects every log line that says the API server refused.
type forbidden struct {
	mu    sync.Mutex
	lines []string
}

func (f *forbidden) record(prefix, args string) {
	if strings.Contains(args, "forbidden") || strings.Contains(args, "Forbidden") {
		f.mu.Lock()
		f.lines = append(f.lines, prefix+" "+args)
		f.mu.Unlock()
	}
}

// The chart's RBAC is enough for everything the controllers do: the
// rendered ServiceAccount, roles and bindings are applied, and the
// controllers (kwok provider, leader election on) run with that
// ServiceAccount's token while a Deployment grows onto new nodes, then
// shrinks to nothing and its nodes go. No request is refused.
func TestControllersRunAsTheChartServiceAccount(t *testing.T) {
	ctx := context.Background()
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nodewright"}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	for _, o := range render(t, "--set", "settings.cloudProvider=kwok") {
		if o.GetKind() == "Deployment" {
			continue // the image cannot run here; the test runs its binary's code instead
		}
		if err := admin.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}

	clientset := kubernetes.NewForConfigOrDie(cp.Config)
	token, err := clientset.CoreV1().ServiceAccounts("nodewright").CreateToken(ctx, "nw-nodewright",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token for the chart's ServiceAccount: %v", err)
	}
	// The API server's address and CA, and nothing of the admin's
	// credentials: only the ServiceAccount's token.
	asChart := &rest.Config{Host: cp.Config.Host, BearerToken: token.Status.Token, TLSClientConfig: rest.TLSClientConfig{
		CAData: cp.Config.CAData, CAFile: cp.Config.CAFile, Insecure: cp.Config.Insecure}}

	refused := &forbidden{}
	logger := funcr.New(refused.record, funcr.Options{})
	klog.SetLogger(logger) // informers report refused lists through klog
	types, err := catalog.Parse("test", []byte(`[{"name": "c-4x-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
	  "resources": {"cpu": "4", "memory": "16Gi", "pods": "110"}, "offerings": [{"capacityType": "on-demand", "zone": "zone-a", "price": 0.2}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- operator.Run(runCtx, asChart, operator.Config{
			CloudProvider: "kwok", InstanceTypes: types, KWOKKubelet: true, BatchIdle: time.Second, BatchMax: 5 * time.Second,
			MinValuesPolicy: sched.MinValuesStrict, LeaderElection: true, LeaderElectionNamespace: "nodewright",
			MetricsAddr: "0", HealthAddr: "0", Logger: logger, Embedded: true,
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controllers as the chart's ServiceAccount: %v", err)
		}
	})

	if err := admin.Create(ctx, &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "chart"}}); err != nil {
		t.Fatal(err)
	}
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "chart"}}
	pool.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "chart"}
	pool.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}}}
	pool.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
	if err := admin.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	replicas := int32(3)
	labels := map[string]string{"app": "chart"}
	app := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "chart", Namespace: "default"}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{karpv1.LabelNodePool: "chart"},
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}}}}}}
	if err := admin.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	poll := func(what string, cond func(ctx context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, cond); err != nil {
			t.Fatalf("%s: %v (refused: %v)", what, err, refused.lines)
		}
	}
	poll("the pods running on new nodes", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := admin.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 3, nil
	})
	lease := &coordinationv1.Lease{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "nodewright", Name: "nodewright-leader-election"}, lease); err != nil {
		t.Errorf("no leader-election lease in the release namespace: %v", err)
	}
	scaled := app.DeepCopy()
	scaled.Spec.Replicas = new(int32(0))
	if err := admin.Patch(ctx, scaled, client.MergeFrom(app)); err != nil {
		t.Fatal(err)
	}
	poll("the empty nodes removed", func(ctx context.Context) (bool, error) {
		var claims karpv1.NodeClaimList
		if err := admin.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: "chart"}); err != nil {
			return false, err
		}
		return len(claims.Items) == 0, nil
	})
	refused.mu.Lock()
	defer refused.mu.Unlock()
	for _, line := range refused.lines {
		t.Errorf("refused: %s", line)
	}
}
