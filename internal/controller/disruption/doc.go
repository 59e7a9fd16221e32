// Package disruption runs Nodewright's disruption against the cluster: a
// NodeClaim reconciler that records pod events on the NodeClaim
// (status.lastPodEventTime), keeps its Consolidatable and Drifted
// conditions, and deletes it once expireAfter has passed; and a disruption
// loop that, every few seconds, builds candidates from the cluster model,
// asks the pure planners in internal/disruption (emptiness, drift,
// consolidation), validates a consolidation again after 15 s, and carries
// it out.
//
// Every decision is written to the API before it acts, so that it outlives
// the process: each candidate NodeClaim gets its DisruptionReason condition
// (and, for a replace decision, ReplacementsAnnotation naming all of its
// replacements, chosen by deterministic name), then its node is tainted
// karpenter.sh/disrupted:NoSchedule, then the replacements are created,
// and the candidates are deleted only once every replacement exists and is
// Initialized. A replacement that cannot be created is retried until the
// decision's deadline; one that is gone, or the deadline passing, rolls the
// decision back (replacements deleted, then the candidates untainted and
// unmarked). A new Loop (a restart) first finds the decisions written on
// NodeClaims: it carries on a replace decision whose replacements all
// exist and rolls back any other. At the start of every pass, marks that no
// live decision holds are removed (Karpenter does the same), except on
// NodeClaims or nodes being deleted and on nodes the interruption
// controller holds. Node taints are written with the node's
// resourceVersion as a precondition, re-read and retried on a conflict, so
// another actor's concurrent change is not lost.
package disruption
