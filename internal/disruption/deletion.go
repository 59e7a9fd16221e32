package disruption

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/sched"
)

// deletion is one way of choosing which consolidatable nodes simply go:
// the nodes taken (in the order asked), why each other one stays, and
// what it is worth.
type deletion struct {
	taken []Candidate
	stays map[string]string
	// saved is the hourly price of the nodes taken (a node of unknown
	// price counts 0); moved is how many pods they send elsewhere.
	saved float64
	moved int
}

// better: more $/h removed; then more nodes removed (prices unknown);
// then fewer pods moved. Equal plans keep the earlier order.
func (d deletion) better(o deletion) bool {
	const epsilon = 1e-9
	switch {
	case d.saved > o.saved+epsilon:
		return true
	case d.saved < o.saved-epsilon:
		return false
	case len(d.taken) != len(o.taken):
		return len(d.taken) > len(o.taken)
	}
	return d.moved < o.moved
}

// deletionOrders are the orders in which deletion asks candidates to go.
// Asking is greedy (a node that fits goes, its pods kept where they
// land), so the order decides which nodes are left: fewest pods first
// (Karpenter's disruption cost) drains small nodes into big ones, and
// big, nearly empty spot nodes, which no replacement may take, would
// stay for good. Each order is tried and the plan that removes the most
// $/h wins:
//   - fewest pods first (the base order, Karpenter's);
//   - the most expensive first;
//   - the most expensive per requested CPU first (the least value for
//     the money);
//   - the least utilized (requested over allocatable CPU) first.
//
// Ties keep the base order, so orders that do not differ are one.
func deletionOrders(base []Candidate, cluster []sched.Node, pools []sched.NodePool, requestsOf func(*corev1.Pod) corev1.ResourceList) [][]Candidate {
	alloc := make(map[string]int64, len(cluster))
	for _, n := range cluster {
		q := n.Allocatable[corev1.ResourceCPU]
		alloc[n.Name] = q.MilliValue()
	}
	price := make(map[string]float64, len(base))
	requested := make(map[string]int64, len(base))
	for _, c := range base {
		price[c.Name()], _ = CandidatePrice(c, pools)
		requested[c.Name()] = requestedCPU(c.Pods, requestsOf)
	}
	perCPU := func(c Candidate) float64 {
		return price[c.Name()] / float64(max(requested[c.Name()], 1))
	}
	utilization := func(c Candidate) float64 {
		a := alloc[c.Node.Name]
		if a <= 0 {
			return 1
		}
		return float64(requested[c.Name()]) / float64(a)
	}
	orders := [][]Candidate{base}
	for _, less := range []func(a, b Candidate) int{
		func(a, b Candidate) int { return cmp.Compare(price[b.Name()], price[a.Name()]) },
		func(a, b Candidate) int { return cmp.Compare(perCPU(b), perCPU(a)) },
		func(a, b Candidate) int { return cmp.Compare(utilization(a), utilization(b)) },
	} {
		order := slices.Clone(base)
		slices.SortStableFunc(order, less)
		if !slices.ContainsFunc(orders, func(o []Candidate) bool { return sameOrder(o, order) }) {
			orders = append(orders, order)
		}
	}
	return orders
}

// sameOrder: the two orders ask the same nodes in the same sequence.
func sameOrder(a, b []Candidate) bool {
	return slices.EqualFunc(a, b, func(x, y Candidate) bool { return x.Name() == y.Name() })
}

// requestedCPU adds up the CPU requests (millicores) of the pods that
// would move.
func requestedCPU(pods []*corev1.Pod, requestsOf func(*corev1.Pod) corev1.ResourceList) int64 {
	var total int64
	for _, p := range Reschedulable(pods) {
		q := requestsOf(p)[corev1.ResourceCPU]
		total += q.MilliValue()
	}
	return total
}

// planDeletion asks, in each of deletionOrders, every candidate in turn
// whether it can go (its pods, with those of the nodes taken before it,
// placed on the nodes that stay), within each pool's budget (left), and
// keeps the plan that removes the most $/h. Every order gets its own
// solver session over the receivers, so a plan never sees another's
// moves. All the nodes of the winning plan go in one command.
func planDeletion(eligible []Candidate, cluster []sched.Node, pools []sched.NodePool, base sched.Input, left map[string]int, budgetWhy map[string]string, disrupting map[string]int) deletion {
	in := base
	in.Nodes = receivers(cluster)
	moves := make(map[string]int, len(eligible))
	for _, c := range eligible {
		moves[c.Name()] = len(Reschedulable(c.Pods))
	}
	orders := deletionOrders(eligible, cluster, pools, base.RequestsOf)
	// One session serves every order: prepared once (the costly part, a
	// solver state over the whole cluster), reverted to as made between
	// orders.
	session := sched.NewSession(in, nodeNames(orders[0]), func(p *corev1.Pod) bool { return !ownedByNodeOrDaemonSet(p) })
	best := deleteInOrder(session, orders[0], pools, maps.Clone(left), budgetWhy, disrupting, moves)
	// No other order can do better when the first takes nothing (then no
	// node can go alone, and every order starts from that same cluster:
	// its first node fails, and so on) or takes every node.
	if len(best.taken) == 0 || len(best.taken) == len(eligible) {
		return best
	}
	for _, order := range orders[1:] {
		session.Revert(0)
		session.Reorder(nodeNames(order))
		if d := deleteInOrder(session, order, pools, maps.Clone(left), budgetWhy, disrupting, moves); d.better(best) {
			best = d
		}
	}
	return best
}

// nodeNames are the candidates' node names, in order.
func nodeNames(order []Candidate) []string {
	names := make([]string, 0, len(order))
	for _, c := range order {
		names = append(names, c.Node.Name)
	}
	return names
}

// deleteInOrder is one greedy pass of planDeletion on a session made (or
// reordered) for order: each candidate drained into the nodes left in
// turn, kept when every pod finds a place and reverted otherwise.
func deleteInOrder(session *sched.Session, order []Candidate, pools []sched.NodePool, left map[string]int, budgetWhy map[string]string, disrupting map[string]int, moves map[string]int) deletion {
	d := deletion{stays: map[string]string{}}
	for _, c := range order {
		pool := c.NodePool.Name
		if left[pool] <= 0 {
			d.stays[c.Name()] = fmt.Sprintf("the disruption budget is spent: %s, %d disrupting", budgetWhy[pool], disrupting[pool])
			continue
		}
		if u := session.Drain(c.Node.Name); u != nil {
			if u.Pod == nil { // the node is not one the solver's snapshot lets take part
				d.stays[c.Name()] = u.Reason
			} else {
				d.stays[c.Name()] = fmt.Sprintf("pod %s/%s would have no place on the other nodes: %s", u.Pod.Namespace, u.Pod.Name, u.Reason)
			}
			continue
		}
		left[pool]--
		d.taken = append(d.taken, c)
		price, _ := CandidatePrice(c, pools)
		d.saved += price
		d.moved += moves[c.Name()]
	}
	return d
}
