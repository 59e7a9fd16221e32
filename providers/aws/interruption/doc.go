// Package interruption handles the AWS events that end instances before
// Nodewright would: spot interruption warnings, rebalance recommendations,
// AWS Health scheduled changes and instance state changes, delivered by
// EventBridge to an SQS queue. Messages parses them (pure); Controller
// long-polls the queue and, for the instances of NodeClaims, marks an
// interrupted spot offering unavailable, cordons the node, plans new places
// for its pods at once (replacement capacity first, where the warning
// leaves time), then deletes the NodeClaim so the node drains.
package interruption
