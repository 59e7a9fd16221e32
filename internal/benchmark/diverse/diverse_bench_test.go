package diverse

import (
	"fmt"
	"testing"

	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
)

func input(n int) sched.Input {
	types := InstanceTypes()
	its := make([]*catalog.InstanceType, len(types))
	for i := range types {
		its[i] = &types[i]
	}
	return sched.Input{Pods: Pods(n, 1), NodePools: []sched.NodePool{{NodePool: NodePool(), InstanceTypes: its}}}
}

// BenchmarkSolveDiverse reports, per size: pods/s, nodes, $/h, and $/h over
// the lower bound and over Karpenter's measured plan.
func BenchmarkSolveDiverse(b *testing.B) {
	for _, n := range []int{1000, 5000, 20000, 50000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			in := input(n)
			var plan sched.Plan
			b.ResetTimer()
			for b.Loop() {
				plan = sched.Solve(in)
			}
			b.StopTimer()
			if lb := LowerBound(in.Pods); plan.TotalPrice() < lb*0.999 {
				b.Fatalf("plan costs $%.2f/h, below the lower bound $%.2f/h: pods were dropped or double-packed", plan.TotalPrice(), lb)
			}
			secs := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(n)/secs, "pods/s")
			b.ReportMetric(float64(len(plan.NodeClaims)), "nodes")
			b.ReportMetric(plan.TotalPrice(), "$/h")
			b.ReportMetric(plan.TotalPrice()/LowerBound(in.Pods), "x-lower-bound")
			if ref, ok := Reference[n]; ok {
				b.ReportMetric(plan.TotalPrice()/ref.PricePerH, "x-karpenter-cost")
			}
			b.ReportMetric(float64(len(plan.Unschedulable)), "unschedulable")
		})
	}
}
