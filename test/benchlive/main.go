package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodewright/nodewright/test/integration/controlplane"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-live:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		pods             = flag.String("pods", "500,2000,10000@200", "sizes of Deployment A, comma-separated (Deployment B, zone-spread, gets a fifth of each); each size runs on a fresh control plane; SIZE@QPS runs kube-controller-manager and kube-scheduler at QPS requests/s (their defaults, 20 and 50, alone take over 5 minutes to create and bind 12,000 pods)")
		consolidateAfter = flag.String("consolidate-after", "0s", "the NodePool's consolidateAfter")
		budget           = flag.String("budget", "100%", "the NodePool's disruption budget (nodes)")
		percent          = flag.Int("scale-down-percent", 10, "what both Deployments are scaled to, in percent")
		settle           = flag.Duration("settle", 90*time.Second, "after the scale-down, the node count must stay unchanged this long (not counted in the settled time); longer than a consolidation round, validation included")
		upTimeout        = flag.Duration("up-timeout", 20*time.Minute, "give up on the scale-up after this long")
		downTimeout      = flag.Duration("down-timeout", 30*time.Minute, "give up on the scale-down after this long")
		nodewrightBin    = flag.String("nodewright", "bin/nodewright", "the nodewright binary (make bench-live builds it)")
		kwokBin          = flag.String("kwok", controlplane.KWOKBinary(), "the real kwok binary (default $"+controlplane.EnvKWOKBin+"; hack/kwok.sh prints it)")
		binDir           = flag.String("controlplane-dir", "", "directory of etcd, kube-apiserver, kube-controller-manager, kube-scheduler (default $"+controlplane.EnvBinDir+", else hack/controlplane.sh)")
		logRoot          = flag.String("logs", "", "directory for the logs of every process (default: a new temporary directory)")
		keepLogs         = flag.Bool("keep-logs", false, "keep the logs after a successful run too (they are always kept after a failure)")
	)
	flag.Parse()
	// The benchmark's own clients log nothing worth reading; the processes
	// it measures log into the log directory.
	ctrllog.SetLogger(logr.Discard())

	sizes, err := parseSizes(*pods)
	if err != nil {
		return err
	}
	if *percent <= 0 || *percent > 100 {
		return fmt.Errorf("-scale-down-percent %d: want 1..100", *percent)
	}
	if *kwokBin == "" {
		return fmt.Errorf("no kwok binary: pass -kwok or set %s (hack/kwok.sh builds it and prints its path)", controlplane.EnvKWOKBin)
	}
	nwBin, err := filepath.Abs(*nodewrightBin)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", *nodewrightBin, err)
	}
	if _, err := os.Stat(nwBin); err != nil {
		return fmt.Errorf("the nodewright binary: %w (make build, or make bench-live, builds it)", err)
	}
	if *binDir == "" {
		if *binDir, err = controlplane.FindBinDir(); err != nil {
			return err
		}
	}

	root := *logRoot
	if root == "" {
		if root, err = os.MkdirTemp("", "nodewright-bench-live-"); err != nil {
			return fmt.Errorf("creating the log directory: %w", err)
		}
	} else if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("creating the log directory %s: %w", root, err)
	}
	fmt.Fprintf(os.Stderr, "logs of every process: %s\n", root)

	entries := kwokCatalog()
	catalogPath, err := writeCatalog(root, entries)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills at once; children die with us (parent-death signal)
	}()

	s := settings{
		binDir: *binDir, kwokBin: *kwokBin, nodewrightBin: nwBin, catalogPath: catalogPath, book: newPriceBook(entries),
		settle: *settle, upTimeout: *upTimeout, downTimeout: *downTimeout, progress: os.Stderr, clock: clock.RealClock{},
	}
	var (
		results []result
		errs    []error
	)
	for _, size := range sizes {
		w := workload{pods: size.pods, componentQPS: size.componentQPS, consolidateAfter: *consolidateAfter, budget: *budget, scaleDownPercent: *percent}
		dir := filepath.Join(root, fmt.Sprintf("pods-%d", size.pods))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", dir, err)
		}
		res, err := runOne(ctx, s, w, dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s pods: %w (logs in %s)", w.label(), err, dir))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		results = append(results, res)
		if res.upErr != nil || res.downErr != nil {
			errs = append(errs, fmt.Errorf("%s pods: a phase did not finish (logs in %s)", w.label(), dir))
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(results) > 0 {
		fmt.Println()
		fmt.Printf("Nodewright live benchmark: %s; NodePool linux/amd64, spot+on-demand, WhenEmptyOrUnderutilized, consolidateAfter %s, budget %s; scale-down to %d%%, settled = last node change, stable for %s; SIZE @QPS: kube-controller-manager and kube-scheduler at QPS requests/s (else their defaults)\n\n",
			time.Now().UTC().Format(time.RFC3339), *consolidateAfter, *budget, *percent, *settle)
		render(os.Stdout, results)
	}
	if len(errs) > 0 {
		fmt.Fprintf(os.Stderr, "logs kept in %s\n", root)
		return errors.Join(errs...)
	}
	if *keepLogs || *logRoot != "" {
		fmt.Fprintf(os.Stderr, "logs in %s\n", root)
		return nil
	}
	return os.RemoveAll(root)
}

// size is one run: Deployment A's pods, and the control plane's client
// rate (0: the components' defaults).
type size struct{ pods, componentQPS int }

// parseSizes reads "500,2000,10000@200".
func parseSizes(s string) ([]size, error) {
	var out []size
	for _, f := range strings.Split(s, ",") {
		podsText, qpsText, withQPS := strings.Cut(strings.TrimSpace(f), "@")
		n, err := strconv.Atoi(podsText)
		if err != nil || n < 5 {
			return nil, fmt.Errorf("-pods %q: want comma-separated sizes of at least 5, each optionally @QPS", s)
		}
		sz := size{pods: n}
		if withQPS {
			if sz.componentQPS, err = strconv.Atoi(qpsText); err != nil || sz.componentQPS < 1 {
				return nil, fmt.Errorf("-pods %q: %q: want SIZE@QPS with a QPS of at least 1", s, f)
			}
		}
		out = append(out, sz)
	}
	return out, nil
}
