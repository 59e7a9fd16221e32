// Package interruption handles the AWS events that end instances before
// Nodewright would: spot interruption warnings, rebalance recommendations,
// AWS Health scheduled changes and instance state changes, delivered by
// EventBridge to an SQS queue. Messages parses them (pure); Controller
// long-polls the queue and, for the instances of NodeClaims, marks an
// interrupted spot offering unavailable, cordons the node, plans new places
// for its pods at once (replacement capacity first, where the warning
// leaves time), then deletes the NodeClaim so the node drains.
//
// The decision outlives the process and the message: it is written on the
// NodeClaim (AnnotationInterruption and AnnotationInterruptionDeadline)
// before the message is deleted, and every poll carries out the decisions
// it finds in the API. Replacements are planned once per interruption
// (AnnotationInterruptionPlanned is written under an optimistic lock
// first) and named on the NodeClaim (AnnotationInterruptionReplacements),
// so a restarted controller waits for the same replacements, and deletes
// the NodeClaim at the deadline at the latest. They are planned again,
// the deadline unchanged, only when nothing came of the plan: the planner
// created nothing (an error), or a replacement is gone before it was
// initialized. A decision that cannot be read whole (an unknown kind, a
// deadline that is not a time) is reported and read safely, never as
// "delete now".
package interruption
