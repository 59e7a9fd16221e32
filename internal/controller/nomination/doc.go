// Package nomination hands kube-scheduler Nodewright's plan. When a node
// the solver bought registers, the pods planned onto it get
// status.nominatedNodeName set to it before it becomes schedulable, so
// kube-scheduler tries that node first (it always evaluates a pod's
// nominated node before the others) and keeps the room for them when it
// places other pods. Without it kube-scheduler spreads pods over whichever
// nodes turn Ready first, fragments the plan, and pods left over need a
// node nobody planned. Pods held to a DoNotSchedule topology spread get no
// hint: kube-scheduler counts a node's nominated pods against the spread,
// so hinted spread pods block each other (see wantsHint).
//
// It runs only with operator.Config.NominatedNodeHints
// (--nominated-node-hints): kube-scheduler adds the pods nominated to a
// node at every filter of that node, so each attempt costs time in
// proportion to all the hinted pods, which at thousands of pending pods
// slows scheduling more than the held room is worth.
//
// The hint holds as long as the provisioner's nomination does:
// kube-scheduler clears a pod's nomination whenever an attempt fails (for
// example while the node is not Ready yet), so it is set again until the
// pod binds or the nomination lapses; then the hint is withdrawn, so the pod does not wait
// on a stale nomination kube-scheduler may not revisit for minutes. When a
// NodeClaim is deleted, the hints pointing at its node are cleared so the
// pods are provisionable again at once. It owns no decision: the plan
// comes from the provisioner's nominations in internal/state.
package nomination
