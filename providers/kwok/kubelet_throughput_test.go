//go:build kubeletthroughput

package kwok_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nodewright/nodewright/providers/kwok"
	"github.com/nodewright/nodewright/test/integration/controlplane"
)

// writeCounter counts the API's answers to writes, by status code.
type writeCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

type countingTransport struct {
	next http.RoundTripper
	c    *writeCounter
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if r.Method != http.MethodGet && err == nil {
		t.c.mu.Lock()
		t.c.counts[fmt.Sprintf("%s %d", r.Method, resp.StatusCode)]++
		t.c.mu.Unlock()
	}
	return resp, err
}

// TestKubeletThroughput measures (and logs; it asserts no time) how fast the
// emulated kubelet runs and finishes bound pods on a real API server:
//
//	NODEWRIGHT_CONTROLPLANE_DIR=$(hack/controlplane.sh) go test -tags kubeletthroughput -run Throughput -v ./providers/kwok/
//
// KUBELET_PODS (500), KUBELET_NODES (10), KUBELET_POD_WORKERS (default)
// and KUBELET_CONTENTION (1: another writer touches pods and nodes
// throughout) shape the run.
func TestKubeletThroughput(t *testing.T) {
	dir := os.Getenv(controlplane.EnvBinDir)
	if dir == "" {
		t.Skip("no control plane: set " + controlplane.EnvBinDir)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	pods, nodes := envInt("KUBELET_PODS", 500), envInt("KUBELET_NODES", 10)

	counter := &writeCounter{counts: map[string]int{}}
	cfg := rest.CopyConfig(cp.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, c: counter} }
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: clientgoscheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	opts := kwok.KubeletOptions{Workers: kwok.KubeletWorkers{Pods: envInt("KUBELET_POD_WORKERS", 0)}}
	if err := kwok.NewKubelet(mgr.GetClient(), clock.RealClock{}, opts).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(cp.Config, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes {
		name := fmt.Sprintf("kwok-%d", i)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: kwok.ProviderIDPrefix + name}}
		n.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1000"), corev1.ResourceCPU: resource.MustParse("1000")}
		if err := admin.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	parallel(pods, func(i int) error {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: "default"},
			Spec:       corev1.PodSpec{NodeName: fmt.Sprintf("kwok-%d", i%nodes), Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		}
		return admin.Create(ctx, p)
	})
	created := time.Since(began)

	// KUBELET_CONTENTION=1: another writer (as Nodewright, kube-scheduler)
	// annotates the pods and labels the nodes all along.
	if os.Getenv("KUBELET_CONTENTION") == "1" {
		go contend(ctx, admin, pods, nodes)
	}

	// The pods wait, bound; the kubelet starts now.
	began = time.Now()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	running := waitFor(t, ctx, "pods running", func() (bool, error) {
		return countPods(ctx, admin, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }) == pods, nil
	})
	t.Logf("%d bound pods created in %v; the kubelet started, all Running %v later: %.1f pods/s", pods, created.Round(time.Millisecond), running.Sub(began).Round(time.Millisecond), float64(pods)/running.Sub(began).Seconds())
	waitFor(t, ctx, "nodes ready", func() (bool, error) {
		var list corev1.NodeList
		if err := admin.List(ctx, &list); err != nil {
			return false, err
		}
		ready := 0
		for _, n := range list.Items {
			if c := findReady(&n); c.Status == corev1.ConditionTrue && len(n.Spec.Taints) == 0 {
				ready++
			}
		}
		return ready == nodes, nil
	})

	began = time.Now()
	parallel(pods, func(i int) error {
		return admin.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: "default"}})
	})
	deleted := time.Since(began)
	gone := waitFor(t, ctx, "pods gone", func() (bool, error) {
		return countPods(ctx, admin, func(*corev1.Pod) bool { return true }) == 0, nil
	})
	t.Logf("%d pods deleted (grace 30s) in %v: all gone %v after the first delete: %.1f pods/s", pods, deleted.Round(time.Millisecond), gone.Sub(began).Round(time.Millisecond), float64(pods)/gone.Sub(began).Seconds())
	counter.mu.Lock()
	t.Logf("the kubelet's writes by answer: %v", counter.counts)
	counter.mu.Unlock()
}

func contend(ctx context.Context, kube client.Client, pods, nodes int) {
	for round := 0; ctx.Err() == nil; round++ {
		touch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{"example.com/touched":"%d"}}}`, round)))
		parallel(pods, func(i int) error {
			_ = kube.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: "default"}}, touch)
			if i < nodes {
				_ = kube.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kwok-%d", i)}}, touch)
			}
			return nil
		})
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func parallel(n int, f func(int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					panic(err)
				}
			}
		}()
	}
	wg.Wait()
}

func countPods(ctx context.Context, kube client.Client, match func(*corev1.Pod) bool) int {
	var list corev1.PodList
	if err := kube.List(ctx, &list, client.InNamespace("default")); err != nil {
		return -1
	}
	n := 0
	for i := range list.Items {
		if match(&list.Items[i]) {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, ctx context.Context, what string, done func() (bool, error)) time.Time {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		ok, err := done()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within 5 minutes", what)
	return time.Time{}
}
