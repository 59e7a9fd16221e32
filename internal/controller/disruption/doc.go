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
// each stamped with ReplacingAnnotation naming its candidates, and the
// candidates are deleted only once every replacement exists and is
// Initialized. A replacement that cannot be created is retried until the
// decision's deadline; one that is gone, or the deadline passing, rolls the
// decision back (replacements deleted, then the candidates untainted and
// unmarked; a replacement that cannot be deleted is left as ordinary
// capacity a minute past the deadline). A new Loop (a restart) first finds
// the decisions written on NodeClaims: it carries on a replace decision
// whose replacements all exist and carry its stamp, and rolls back any
// other. A decision never adopts or deletes a NodeClaim without its stamp:
// a malformed or foreign name in ReplacementsAnnotation is logged and the
// decision rolled back without deleting it. At the start of every pass,
// marks that no live decision holds are removed (Karpenter does the same),
// except on NodeClaims or nodes being deleted and on nodes the interruption
// controller holds; the replacements an interrupted NodeClaim waits for
// are not disrupted. Taints, conditions and annotations are written under
// an optimistic lock; a conflict backs off and re-reads through the
// uncached reader (Options.APIReader), so neither another actor's
// concurrent change nor a lagging cache is lost or looped on.
package disruption
