//go:build integration

package chaos_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// clusterState is one reading of what a run is about: the NodeClaims and
// Nodes of the test's NodePool, the pods of its app, and (AWS) the cloud's
// live instances.
type clusterState struct {
	at        time.Time
	claims    []karpv1.NodeClaim
	nodes     []corev1.Node
	pods      []corev1.Pod
	instances []instance
	// aws: instances are the fake AWS's; otherwise the Nodes are the
	// instances (kwok).
	aws bool
}

// instance is a live (pending or running) cloud instance.
type instance struct {
	id, state, nodeClaim string
	launched             time.Time
}

// readCluster reads the pool's NodeClaims and Nodes and the app's pods.
func readCluster(ctx context.Context, kube client.Client, pool, app string) (*clusterState, error) {
	s := &clusterState{at: time.Now()}
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.LabelNodePool: pool}); err != nil {
		return nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	var nodes corev1.NodeList
	if err := kube.List(ctx, &nodes, client.MatchingLabels{karpv1.LabelNodePool: pool}); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app": app}); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	s.claims, s.nodes, s.pods = claims.Items, nodes.Items, pods.Items
	sort.Slice(s.claims, func(i, j int) bool { return s.claims[i].Name < s.claims[j].Name })
	sort.Slice(s.nodes, func(i, j int) bool { return s.nodes[i].Name < s.nodes[j].Name })
	sort.Slice(s.pods, func(i, j int) bool { return s.pods[i].Name < s.pods[j].Name })
	return s, nil
}

// claimOf returns the NodeClaim that recorded providerID.
func (s *clusterState) claimOf(providerID string) *karpv1.NodeClaim {
	for i := range s.claims {
		if providerID != "" && s.claims[i].Status.ProviderID == providerID {
			return &s.claims[i]
		}
	}
	return nil
}

// claimNamed returns the NodeClaim called name.
func (s *clusterState) claimNamed(name string) *karpv1.NodeClaim {
	for i := range s.claims {
		if s.claims[i].Name == name {
			return &s.claims[i]
		}
	}
	return nil
}

// duplicates are the NodeClaims that own more than one instance, and the
// provider IDs more than one NodeClaim recorded.
func (s *clusterState) duplicates() []string {
	var out []string
	byClaim := map[string][]string{}
	if s.aws {
		for _, in := range s.instances {
			if in.nodeClaim != "" {
				byClaim[in.nodeClaim] = append(byClaim[in.nodeClaim], in.id)
			}
		}
	} else {
		// A kwok instance is its Node: count the Nodes of each provider ID.
		for _, n := range s.nodes {
			if n.Spec.ProviderID != "" {
				byClaim[n.Spec.ProviderID] = append(byClaim[n.Spec.ProviderID], n.Name)
			}
		}
	}
	for key, ids := range byClaim {
		if len(ids) > 1 {
			out = append(out, fmt.Sprintf("%s has %d instances: %s", key, len(ids), strings.Join(ids, ", ")))
		}
	}
	byProviderID := map[string][]string{}
	for _, nc := range s.claims {
		if nc.Status.ProviderID != "" {
			byProviderID[nc.Status.ProviderID] = append(byProviderID[nc.Status.ProviderID], nc.Name)
		}
	}
	for id, names := range byProviderID {
		if len(names) > 1 {
			out = append(out, fmt.Sprintf("provider ID %s is recorded by %d nodeclaims: %s", id, len(names), strings.Join(names, ", ")))
		}
	}
	slices.Sort(out)
	return out
}

// leaked are the live instances no NodeClaim owns: none recorded their
// provider ID, and none that has not recorded one yet was launched for it.
func (s *clusterState) leaked() []string {
	var out []string
	if s.aws {
		for _, in := range s.instances {
			if nc := s.claimNamed(in.nodeClaim); nc != nil && (nc.Status.ProviderID == "" || strings.HasSuffix(nc.Status.ProviderID, "/"+in.id)) {
				continue
			}
			out = append(out, fmt.Sprintf("instance %s (tagged for nodeclaim %q, launched %s ago)", in.id, in.nodeClaim, s.at.Sub(in.launched).Round(time.Second)))
		}
		return out
	}
	for _, n := range s.nodes {
		if n.DeletionTimestamp != nil || s.claimOf(n.Spec.ProviderID) != nil {
			continue
		}
		if nc := s.claimNamed(n.Name); nc != nil && nc.Status.ProviderID == "" {
			continue // launched for a claim that has not recorded it yet
		}
		out = append(out, fmt.Sprintf("node %s (%s, created %s ago)", n.Name, n.Spec.ProviderID, s.at.Sub(n.CreationTimestamp.Time).Round(time.Second)))
	}
	return out
}

// stuckTaints are the nodes tainted karpenter.sh/disrupted:NoSchedule
// whose NodeClaim is not being deleted.
func (s *clusterState) stuckTaints() []string {
	var out []string
	for _, n := range s.nodes {
		if !disruptedTaint(&n) {
			continue
		}
		if nc := s.claimOf(n.Spec.ProviderID); nc != nil && nc.DeletionTimestamp != nil {
			continue
		}
		out = append(out, "node "+n.Name)
	}
	return out
}

// stuckDecisions are the NodeClaims marked with a DisruptionReason that
// are not being deleted.
func (s *clusterState) stuckDecisions() []string {
	var out []string
	for _, nc := range s.claims {
		if c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason); c != nil && c.Status == metav1.ConditionTrue && nc.DeletionTimestamp == nil {
			out = append(out, fmt.Sprintf("nodeclaim %s (%s since %s)", nc.Name, c.Reason, c.LastTransitionTime.UTC().Format(time.TimeOnly)))
		}
	}
	return out
}

// running counts the app's pods that are bound and Running and not being
// deleted, and names the others.
func (s *clusterState) running() (int, []string) {
	n := 0
	var others []string
	for _, p := range s.pods {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
			n++
			continue
		}
		others = append(others, fmt.Sprintf("%s (%s on %q, deleting %t)", p.Name, p.Status.Phase, p.Spec.NodeName, p.DeletionTimestamp != nil))
	}
	return n, others
}

// unsettled names what is still moving: NodeClaims being deleted or not
// initialized, disruption in flight, Nodes with none of the app's pods.
func (s *clusterState) unsettled(emptyNodesCount bool) []string {
	var out []string
	for _, nc := range s.claims {
		switch {
		case nc.DeletionTimestamp != nil:
			out = append(out, "nodeclaim "+nc.Name+" deleting")
		case !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized):
			out = append(out, "nodeclaim "+nc.Name+" not initialized")
		}
	}
	for _, n := range s.nodes {
		if disruptedTaint(&n) {
			out = append(out, "node "+n.Name+" tainted disrupted")
		}
	}
	if emptyNodesCount {
		used := map[string]bool{}
		for _, p := range s.pods {
			used[p.Spec.NodeName] = true
		}
		for _, n := range s.nodes {
			if !used[n.Name] && n.DeletionTimestamp == nil {
				out = append(out, "node "+n.Name+" empty")
			}
		}
	}
	return out
}

// disrupting reports whether a disruption decision is visible in the API:
// a disrupted taint, a DisruptionReason, or a NodeClaim being deleted.
func (s *clusterState) disrupting() bool {
	for _, n := range s.nodes {
		if disruptedTaint(&n) {
			return true
		}
	}
	for _, nc := range s.claims {
		if nc.DeletionTimestamp != nil || meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason) {
			return true
		}
	}
	return false
}

// launching reports whether a NodeClaim waits for its launch (no provider
// ID recorded yet).
func (s *clusterState) launching() bool {
	for _, nc := range s.claims {
		if nc.Status.ProviderID == "" && nc.DeletionTimestamp == nil {
			return true
		}
	}
	return false
}

func disruptedTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == karpv1.TaintKeyDisrupted && t.Effect == corev1.TaintEffectNoSchedule
	})
}

// String dumps the state for a failure message.
func (s *clusterState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "state at %s:\n", s.at.UTC().Format(time.TimeOnly))
	fmt.Fprintf(&b, "  nodeclaims (%d):\n", len(s.claims))
	for _, nc := range s.claims {
		var conds []string
		for _, c := range nc.Status.Conditions {
			if c.Status == metav1.ConditionTrue {
				conds = append(conds, c.Type)
			}
		}
		fmt.Fprintf(&b, "    %s providerID=%q deleting=%t true=[%s]\n", nc.Name, nc.Status.ProviderID, nc.DeletionTimestamp != nil, strings.Join(conds, ","))
	}
	pods := map[string]int{}
	for _, p := range s.pods {
		pods[p.Spec.NodeName]++
	}
	fmt.Fprintf(&b, "  nodes (%d):\n", len(s.nodes))
	for _, n := range s.nodes {
		var taints []string
		for _, t := range n.Spec.Taints {
			taints = append(taints, t.ToString())
		}
		fmt.Fprintf(&b, "    %s providerID=%q deleting=%t pods=%d taints=[%s]\n", n.Name, n.Spec.ProviderID, n.DeletionTimestamp != nil, pods[n.Name], strings.Join(taints, ","))
	}
	if s.aws {
		fmt.Fprintf(&b, "  live instances (%d):\n", len(s.instances))
		for _, in := range s.instances {
			fmt.Fprintf(&b, "    %s %s nodeclaim=%q launched=%s\n", in.id, in.state, in.nodeClaim, in.launched.UTC().Format(time.TimeOnly))
		}
	}
	if _, others := s.running(); len(others) > 0 {
		fmt.Fprintf(&b, "  pods not Running (%d):\n", len(others))
		for _, o := range others {
			fmt.Fprintf(&b, "    %s\n", o)
		}
	}
	return b.String()
}
