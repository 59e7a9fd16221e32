//go:build integration

package controlplane_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodewright/nodewright/test/integration/controlplane"
)

// proxied starts a fault proxy with opts and returns a client loaded from
// its kubeconfig file, as a child process would load it.
func proxied(ctx context.Context, t *testing.T, opts controlplane.FaultOptions) (*controlplane.FaultProxy, kubernetes.Interface) {
	t.Helper()
	p, err := controlplane.StartFaultProxy(ctx, cp, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig)
	if err != nil {
		t.Fatalf("loading %s: %v", p.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

// Each fault kind answers what the apiserver would, and only a lost answer
// leaves the write performed.
func TestFaultProxyFailsWritesAsTheAPIServerWould(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      controlplane.FaultOptions
		isErr     func(error) bool
		performed bool
		want      controlplane.FaultCounts
	}{
		{"write error", controlplane.FaultOptions{WriteErrorRate: 1}, apierrors.IsInternalError, false, controlplane.FaultCounts{Writes: 1, WriteErrors: 1}},
		{"conflict", controlplane.FaultOptions{ConflictRate: 1}, apierrors.IsConflict, false, controlplane.FaultCounts{Writes: 1, Conflicts: 1}},
		{"lost answer", controlplane.FaultOptions{LostAnswerRate: 1}, apierrors.IsInternalError, true, controlplane.FaultCounts{Writes: 1, LostAnswers: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(ctx, t)
			p, c := proxied(ctx, t, tc.opts)
			_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, configMap("cm"), metav1.CreateOptions{})
			if err == nil || !tc.isErr(err) {
				t.Fatalf("create through the proxy: got %v, want a %s", err, tc.name)
			}
			_, err = kube(t).CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
			if performed := err == nil; performed != tc.performed || (err != nil && !apierrors.IsNotFound(err)) {
				t.Errorf("after a %s the ConfigMap exists=%t (%v), want %t", tc.name, performed, err, tc.performed)
			}
			// Reads are never failed.
			if _, err := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
				t.Errorf("list through the proxy: %v", err)
			}
			if got := p.Counts(); got != tc.want {
				t.Errorf("counts: got %s, want %s", got, tc.want)
			}
		})
	}
}

// A watch through the proxy streams events as they happen, and writes go
// through unharmed at rate 0.
func TestFaultProxyStreamsWatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := namespace(ctx, t)
	p, c := proxied(ctx, t, controlplane.FaultOptions{})
	w, err := c.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch through the proxy: %v", err)
	}
	defer w.Stop()
	for i := range 3 {
		name := fmt.Sprintf("cm-%d", i)
		if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, configMap(name), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s through the proxy: %v", name, err)
		}
		// The event must arrive while the watch stays open: a buffering
		// proxy would hold it until the stream ends.
		select {
		case ev := <-w.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Added || !ok || cm.Name != name {
				t.Fatalf("event %d: got %s %T, want ADDED %s", i, ev.Type, ev.Object, name)
			}
		case <-ctx.Done():
			t.Fatalf("no watch event for %s", name)
		}
	}
	if got, want := p.Counts(), (controlplane.FaultCounts{Writes: 3}); got != want {
		t.Errorf("counts: got %s, want %s", got, want)
	}
}

// The same seed fails the same writes; the rates hold over many writes.
func TestFaultProxyIsSeeded(t *testing.T) {
	ctx := context.Background()
	opts := controlplane.FaultOptions{Seed: 7, WriteErrorRate: 0.2, ConflictRate: 0.2, LostAnswerRate: 0.2}
	const writes = 100
	var runs [2][]string
	for r := range runs {
		ns := namespace(ctx, t)
		p, c := proxied(ctx, t, opts)
		for i := range writes {
			_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, configMap(fmt.Sprintf("cm-%d", i)), metav1.CreateOptions{})
			runs[r] = append(runs[r], string(apierrors.ReasonForError(err)))
		}
		got := p.Counts()
		t.Logf("run %d: %s", r, got)
		for _, k := range []struct {
			kind string
			n    int64
		}{{"write errors", got.WriteErrors}, {"conflicts", got.Conflicts}, {"lost answers", got.LostAnswers}} {
			if k.n < writes/20 || k.n > writes*2/5 { // 20% expected; far outside means the rates are not applied
				t.Errorf("run %d: %d %s in %d writes at rate 0.2", r, k.n, k.kind, writes)
			}
		}
	}
	for i := range writes {
		if runs[0][i] != runs[1][i] {
			t.Fatalf("write %d: %q in the first run, %q in the second, with the same seed", i, runs[0][i], runs[1][i])
		}
	}
}
