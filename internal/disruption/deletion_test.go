package disruption

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched"
)

// Deletion chooses which nodes go by what stays: the big, underused node
// goes and the small ones take its pods, not the other way round (fewest
// pods first would drain the small ones into it and keep it for good).
// Without prices, the plan that removes the most nodes wins.
func TestDeletionLeavesTheCheapestNodes(t *testing.T) {
	const spot = karpv1.CapacityTypeSpot
	cases := []struct {
		name   string
		shape  []scaledNode
		priced bool
		want   string
	}{{
		// c-96 (4 pods, $1.81/h) and two c-8 (2 and 3 pods, 7 fit on
		// each): the c-8s hold all 9 pods.
		name:   "the big spot node goes, its pods to the small ones",
		shape:  []scaledNode{{"c-96x", "a", spot, 4, 0}, {"c-8x", "a", spot, 2, 0}, {"c-8x", "a", spot, 3, 0}},
		priced: true,
		want:   "n00-c-96x",
	}, {
		name:   "one order for all: the most nodes removed",
		shape:  []scaledNode{{"c-96x", "a", spot, 4, 0}, {"c-8x", "a", spot, 2, 0}, {"c-8x", "a", spot, 3, 0}},
		priced: false,
		want:   "n01-c-8x,n02-c-8x",
	}, {
		// Zone spread: each zone keeps a node; within a zone the c-32
		// (spot, $0.60/h, 3 pods) goes into the c-8 (2 pods), never the
		// reverse.
		name: "per zone, the dear node goes",
		shape: []scaledNode{{"c-32x", "a", spot, 2, 1}, {"c-8x", "a", spot, 1, 1},
			{"c-32x", "b", spot, 2, 1}, {"c-8x", "b", spot, 1, 1}},
		priced: true,
		want:   "n00-c-32x,n02-c-32x",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := scaledDown(t, tc.shape)
			cands, cluster := f.view()
			var pools []sched.NodePool
			if tc.priced {
				pools = []sched.NodePool{{NodePool: f.pool, InstanceTypes: f.types}}
			}
			d, err := Underutilized(cands, cluster, pools, sched.Input{}, DefaultPolicy, epoch)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(d.Command.Candidates); got != tc.want || len(d.Command.Replacements) != 0 {
				t.Errorf("deletes %q (%d replacements), stays %v: want %q deleted", got, len(d.Command.Replacements), d.Stays, tc.want)
			}
		})
	}
}

// One session serves every deletion order: reverted and reordered, it
// answers each order exactly as a session made for that order does.
func TestOneSessionAnswersEveryOrderAsAFreshOne(t *testing.T) {
	sizes := []string{"c-4x", "c-8x", "c-16x", "c-32x", "c-96x", "c-128x", "c-192x"}
	shape := make([]scaledNode, 60)
	for i := range shape {
		ct := karpv1.CapacityTypeSpot
		if i%5 == 0 {
			ct = karpv1.CapacityTypeOnDemand
		}
		shape[i] = scaledNode{instanceType: sizes[i%len(sizes)], zone: string(rune('a' + i%4)), capacityType: ct, load: 1 + i%3, spread: i % 2}
	}
	f := scaledDown(t, shape)
	cands, cluster := f.view()
	pools := []sched.NodePool{{NodePool: f.pool, InstanceTypes: f.types}}
	in := sched.Input{RequestsOf: NewRequestMemo().Of}
	in.Nodes = receivers(cluster)
	left := map[string]int{f.pool.Name: len(cands)}
	moves := map[string]int{}
	orders := deletionOrders(cands, cluster, pools, in.RequestsOf)
	if len(orders) < 3 {
		t.Fatalf("%d distinct orders: the test needs orders that differ", len(orders))
	}
	movable := func(p *corev1.Pod) bool { return !ownedByNodeOrDaemonSet(p) }
	shared := sched.NewSession(in, nodeNames(orders[0]), movable)
	for i, order := range orders {
		if i > 0 {
			shared.Revert(0)
			shared.Reorder(nodeNames(order))
		}
		got := deleteInOrder(shared, order, pools, maps.Clone(left), nil, nil, moves)
		fresh := deleteInOrder(sched.NewSession(in, nodeNames(order), movable), order, pools, maps.Clone(left), nil, nil, moves)
		if names(got.taken) != names(fresh.taken) || got.saved != fresh.saved {
			t.Errorf("order %d: the shared session takes %s ($%.2f/h), a fresh one %s ($%.2f/h)", i, names(got.taken), got.saved, names(fresh.taken), fresh.saved)
		}
		if len(got.taken) == 0 {
			t.Errorf("order %d takes nothing: the test needs orders that take nodes", i)
		}
	}
}
