// Package simulator runs Nodewright's own controllers (the components
// operator.Build wires for the live controller) against an in-memory cluster
// on a virtual clock, so hours of cluster life take seconds.
//
// It owns only what a real cluster would provide: an API server (a
// controller-runtime fake client that stamps virtual creation and deletion
// times, names objects from a seeded generator, and reports every change the
// way informers do), an emulated kube-scheduler that binds pending pods by
// the solver's predicates and marks the rest Unschedulable, the kwok
// kubelet, and Deployment, ReplicaSet, StatefulSet and Job controllers just
// deep enough to create and delete pods. Every decision — what to buy, when,
// what to drain — is the live controllers'.
//
// The engine is single-threaded and deterministic: a FIFO of reconcile
// requests (deduplicated like a workqueue) is drained at each instant, then
// the clock jumps to the next due timer (a requeue, the batch window
// closing, a garbage-collection round, a scenario step), so idle time costs
// nothing and the same inputs and seed give the same report.
package simulator
