package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodewright/nodewright/api/crds"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/test/integration/controlplane"
)

// settings are the flags every run shares.
type settings struct {
	binDir, kwokBin, nodewrightBin string
	catalogPath                    string
	book                           priceBook
	// settle is how long the node count must stay unchanged after the
	// scale-down; upTimeout and downTimeout bound the phases.
	settle, upTimeout, downTimeout time.Duration
	progress                       io.Writer
	clock                          clock.Clock
}

// result is what one run measured. A phase that did not finish leaves its
// figures zero and says why in upErr or downErr.
type result struct {
	w workload
	// Phase 1, from the Deployments' creation.
	allRunning, lastCreated, lastBound time.Duration
	upNodes                            int
	upCost                             float64
	upErr                              error
	// Phase 2, from the scale-down.
	settled   time.Duration
	downNodes int
	downCost  float64
	downErr   error
	// Phase 3: the controller process.
	launched int
	usage    procUsage
	requests requestCounts
	verbs    map[string]int64
}

func scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, kwokv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building the scheme: %w", err)
		}
	}
	return s, nil
}

// runOne measures one workload on a fresh control plane, logging into dir.
// The error is for what prevented a measurement at all (start-up); phases
// that time out are reported in the result.
func runOne(ctx context.Context, s settings, w workload, dir string) (res result, err error) {
	res.w = w
	manifests, err := crds.Manifests()
	if err != nil {
		return res, fmt.Errorf("reading the CRDs: %w", err)
	}
	s.logf("%s: starting the control plane and kwok", w.label())
	cp, err := controlplane.Start(ctx, controlplane.Options{
		BinDir: s.binDir, ControllerManager: true, Scheduler: true, KWOK: s.kwokBin, CRDs: manifests,
		ControllerManagerArgs: w.componentArgs(), SchedulerArgs: w.componentArgs(),
	})
	if err != nil {
		return res, fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		copyLogs(cp.Dir, dir)
		if stopErr := cp.Stop(); stopErr != nil {
			s.logf("stopping the control plane: %v", stopErr)
		}
	}()

	sch, err := scheme()
	if err != nil {
		return res, err
	}
	kube, err := client.New(cp.Config, client.Options{Scheme: sch})
	if err != nil {
		return res, fmt.Errorf("building the client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return res, fmt.Errorf("building the clientset: %w", err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	obs := newObserver(s.clock)
	timeline, err := os.Create(filepath.Join(dir, "timeline.log"))
	if err != nil {
		return res, fmt.Errorf("creating the timeline: %w", err)
	}
	defer timeline.Close()
	obs.journal = timeline
	if err := obs.start(watchCtx, cs); err != nil {
		return res, err
	}

	proxyLog, err := os.Create(filepath.Join(dir, "verbproxy.log"))
	if err != nil {
		return res, fmt.Errorf("creating the proxy's log: %w", err)
	}
	defer proxyLog.Close()
	proxy, err := startVerbProxy(cp.Config, filepath.Join(dir, "nodewright.kubeconfig"), proxyLog)
	if err != nil {
		return res, err
	}
	defer proxy.close(context.Background())
	port, err := freePort()
	if err != nil {
		return res, err
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	ctrl, err := startChild("nodewright", dir, s.nodewrightBin, "controller",
		"--kubeconfig", proxy.kubeconfig,
		"--cloud-provider", "kwok",
		"--kwok-kubelet=false",
		"--leader-elect=false",
		"--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(port),
		"--health-probe-bind-address", "0",
		"--catalog", s.catalogPath,
	)
	if err != nil {
		return res, err
	}
	defer ctrl.stop(10 * time.Second)
	if err := waitHTTP(ctx, ctrl, metricsURL, time.Minute); err != nil {
		return res, err
	}
	if err := w.applyClassAndPool(ctx, kube); err != nil {
		return res, err
	}

	res.upErr = s.scaleUp(ctx, kube, obs, w, &res)
	if res.upErr == nil {
		res.downErr = s.scaleDownPhase(ctx, kube, obs, w, &res)
	} else {
		res.downErr = fmt.Errorf("not run: the scale-up did not finish")
	}

	// Phase 3: read the controller before it stops, even after an
	// interrupt, so a partial run still reports what it measured.
	res.launched = obs.nodeSnapshot(s.book).launched
	if res.usage, err = readProcUsage(ctrl.pid()); err != nil {
		return res, err
	}
	readCtx, cancelRead := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancelRead()
	text, err := fetch(readCtx, metricsURL)
	if err != nil {
		return res, err
	}
	if res.requests, err = parseRequests(text); err != nil {
		return res, err
	}
	res.verbs = proxy.snapshot()
	if f, err := os.Create(filepath.Join(dir, "requests.txt")); err == nil {
		proxy.writeDetail(f)
		f.Close()
	}
	return res, nil
}

// scaleUp applies the Deployments and waits until every pod is Running.
func (s settings) scaleUp(ctx context.Context, kube client.Client, obs *observer, w workload, res *result) error {
	start := s.clock.Now()
	obs.mark("scale-up: applying the Deployments")
	if err := w.applyDeployments(ctx, kube); err != nil {
		return err
	}
	s.logf("%s: applied %d pods; waiting until all are Running", w.label(), w.totalPods())
	err := s.poll(ctx, start, s.upTimeout, func() (bool, string) {
		p, n := obs.pods(), obs.nodeSnapshot(s.book)
		return p.live == w.totalPods() && p.running == w.totalPods(),
			fmt.Sprintf("pods created %d, bound %d, Running %d/%d (zone-spread %d/%d); nodes %d ($%.2f/h)",
				p.created, p.bound, p.running, w.totalPods(), p.spreadRunning, w.spreadPods(), n.count, n.cost)
	})
	p, n := obs.pods(), obs.nodeSnapshot(s.book)
	res.lastCreated = p.lastCreated.Sub(start)
	if err != nil {
		return fmt.Errorf("scale-up: %d of %d pods Running: %w", p.running, w.totalPods(), err)
	}
	res.allRunning = p.lastRunning.Sub(start)
	res.lastBound = p.lastBound.Sub(start)
	res.upNodes, res.upCost = n.count, n.cost
	if len(n.unpriced) > 0 {
		s.logf("%s: %d nodes match no offering of the catalog, e.g. %s", w.label(), len(n.unpriced), n.unpriced[0])
	}
	s.logf("%s: all %d pods Running after %.1fs (last created at %.1fs, last bound at %.1fs) on %d nodes, $%.2f/h",
		w.label(), w.totalPods(), res.allRunning.Seconds(), res.lastCreated.Seconds(), res.lastBound.Seconds(), n.count, n.cost)
	return nil
}

// scaleDownPhase scales both Deployments to the scale-down percentage and
// waits until the nodes have not changed for s.settle while the remaining
// pods run, no node is being disrupted and every NodeClaim has its node.
func (s settings) scaleDownPhase(ctx context.Context, kube client.Client, obs *observer, w workload, res *result) error {
	start := s.clock.Now()
	obs.mark("scale-down")
	if err := w.scaleDown(ctx, kube); err != nil {
		return err
	}
	want := w.scaledTotal()
	s.logf("%s: scaled to %d pods; waiting until the nodes are unchanged for %s", w.label(), want, s.settle)
	err := s.poll(ctx, start, s.downTimeout, func() (bool, string) {
		p, n := obs.pods(), obs.nodeSnapshot(s.book)
		var claims karpv1.NodeClaimList
		if err := kube.List(ctx, &claims); err != nil {
			return false, fmt.Sprintf("listing NodeClaims: %v", err)
		}
		deleting := 0
		for _, c := range claims.Items {
			if c.DeletionTimestamp != nil {
				deleting++
			}
		}
		quiet := s.clock.Since(later(n.lastChange, start))
		done := p.live == want && p.running == want && n.draining == 0 && deleting == 0 &&
			len(claims.Items) == n.count && quiet >= s.settle
		return done, fmt.Sprintf("pods Running %d/%d; nodes %d ($%.2f/h), %d disrupting; NodeClaims %d, %d deleting; unchanged for %.0fs",
			p.running, want, n.count, n.cost, n.draining, len(claims.Items), deleting, quiet.Seconds())
	})
	if err != nil {
		return fmt.Errorf("scale-down: %w", err)
	}
	n := obs.nodeSnapshot(s.book)
	if n.lastChange.After(start) {
		res.settled = n.lastChange.Sub(start)
	}
	res.downNodes, res.downCost = n.count, n.cost
	s.logf("%s: nodes settled %.1fs after the scale-down: %d nodes, $%.2f/h", w.label(), res.settled.Seconds(), n.count, n.cost)
	return nil
}

// poll checks cond every half second until it holds, printing its status
// every ten seconds, until timeout after start.
func (s settings) poll(ctx context.Context, start time.Time, timeout time.Duration, cond func() (bool, string)) error {
	lastPrint := start
	for {
		done, status := cond()
		if done {
			return nil
		}
		now := s.clock.Now()
		if now.Sub(lastPrint) >= 10*time.Second {
			s.logf("  %5.0fs  %s", now.Sub(start).Seconds(), status)
			lastPrint = now
		}
		if now.Sub(start) > timeout {
			return fmt.Errorf("not done after %s: %s", timeout, status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", ctx.Err())
		case <-s.clock.After(500 * time.Millisecond):
		}
	}
}

func (s settings) logf(format string, args ...any) {
	fmt.Fprintf(s.progress, "%s "+format+"\n", append([]any{s.clock.Now().UTC().Format("15:04:05")}, args...)...)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// copyLogs copies the control plane's component logs (and kwok's) from its
// directory, which Stop removes, into dir.
func copyLogs(from, to string) {
	logs, _ := filepath.Glob(filepath.Join(from, "*.log"))
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		_ = os.WriteFile(filepath.Join(to, filepath.Base(l)), data, 0o644)
	}
}
