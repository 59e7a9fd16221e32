// Package disruption runs Nodewright's disruption against the cluster: a
// NodeClaim reconciler that records pod events on the NodeClaim
// (status.lastPodEventTime), keeps its Consolidatable condition, and
// deletes it once expireAfter has passed; and a disruption loop that, every
// few seconds, builds candidates from the cluster model, asks the pure
// planners in internal/disruption (emptiness so far), validates the
// decision again after 15 s, then taints the nodes karpenter.sh/disrupted,
// marks the NodeClaims with their DisruptionReason and deletes them (the
// termination controller drains them).
package disruption
