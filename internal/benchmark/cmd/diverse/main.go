// Command diverse prints Nodewright's figures on Karpenter's diverse-pods
// benchmark next to Karpenter's and the targets, or, with -out, writes the
// workload as files for `nodewright plan`:
//
//	go run ./internal/benchmark/cmd/diverse                      # report
//	go run ./internal/benchmark/cmd/diverse -pods 5000 -out DIR  # DIR/catalog.json, DIR/workload.yaml
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/internal/benchmark/diverse"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
)

func main() {
	pods := flag.Int("pods", 5000, "pods to generate with -out")
	seed := flag.Uint64("seed", 1, "random seed")
	out := flag.String("out", "", "write catalog.json and workload.yaml here instead of reporting")
	sizes := flag.String("sizes", "1000,5000,50000", "pod counts to report on")
	flag.Parse()
	var err error
	if *out != "" {
		err = write(*out, *pods, *seed)
	} else {
		err = report(*sizes, *seed)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func report(sizes string, seed uint64) error {
	types := diverse.InstanceTypes()
	its := make([]*catalog.InstanceType, len(types))
	for i := range types {
		its[i] = &types[i]
	}
	fmt.Printf("Karpenter's diverse-pods benchmark, %d CPUs (%s)\n", runtime.NumCPU(), runtime.Version())
	fmt.Printf("%7s %9s %7s %10s %9s %10s %10s %12s %10s\n", "pods", "pods/s", "nodes", "$/h", "x lower", "solve(s)", "heap(MiB)", "vs Karpenter", "placed")
	for _, f := range strings.Split(sizes, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil {
			return fmt.Errorf("-sizes %q: %w", sizes, err)
		}
		in := sched.Input{Pods: diverse.Pods(n, seed), NodePools: []sched.NodePool{{NodePool: diverse.NodePool(), InstanceTypes: its}}}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		plan := sched.Solve(in)
		secs := time.Since(start).Seconds()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		lb := diverse.LowerBound(in.Pods)
		vs := "-"
		if ref, ok := diverse.Reference[n]; ok {
			vs = fmt.Sprintf("%.1fx, %.2fx $", float64(n)/secs/ref.PodsPerSec, plan.TotalPrice()/ref.PricePerH)
		}
		fmt.Printf("%7d %9.0f %7d %10.0f %9.3f %10.2f %10.0f %12s %10d\n", n, float64(n)/secs, len(plan.NodeClaims), plan.TotalPrice(),
			plan.TotalPrice()/lb, secs, float64(after.HeapAlloc)/(1<<20), vs, n-len(plan.Unschedulable))
	}
	fmt.Println("targets: every pod placed; at 5,000 pods >= 5,000 pods/s (20x) and <= $1,245/h (0.70x); 50,000 pods in < 15 s and < 1 GiB")
	return nil
}

// catalogEntry is the kwok instance-type JSON (allocatable comes from the
// default kube-reserved, 100m CPU and 10Mi, as the benchmark specifies).
type catalogEntry struct {
	Name             string              `json:"name"`
	Architecture     string              `json:"architecture"`
	OperatingSystems []string            `json:"operatingSystems"`
	Resources        corev1.ResourceList `json:"resources"`
	Offerings        []offeringEntry     `json:"offerings"`
}

type offeringEntry struct {
	CapacityType string  `json:"capacityType"`
	Zone         string  `json:"zone"`
	Price        float64 `json:"price"`
}

func write(dir string, pods int, seed uint64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var entries []catalogEntry
	for _, it := range diverse.InstanceTypes() {
		e := catalogEntry{Name: it.Name, Architecture: "amd64", OperatingSystems: it.OperatingSystems, Resources: it.Capacity}
		for _, o := range it.Offerings {
			e.Offerings = append(e.Offerings, offeringEntry{CapacityType: o.CapacityType, Zone: o.Zone, Price: o.Price})
		}
		entries = append(entries, e)
	}
	cat, err := json.MarshalIndent(entries, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "catalog.json"), cat, 0o644); err != nil {
		return err
	}
	var b strings.Builder
	docs := []any{diverse.NodePool(), map[string]any{
		"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": map[string]any{"name": "default"},
	}}
	for _, p := range diverse.Pods(pods, seed) {
		p.UID = ""
		docs = append(docs, p)
	}
	for _, d := range docs {
		y, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	if err := os.WriteFile(filepath.Join(dir, "workload.yaml"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s/catalog.json and %s/workload.yaml (%d pods)\n", dir, dir, pods)
	return nil
}
