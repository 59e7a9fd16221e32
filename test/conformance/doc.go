// Package conformance pins Nodewright's provisioning decisions to
// Karpenter's documented and tested behaviour: each case is a set of
// manifests, decided through the same path as `nodewright plan` (manifests
// fed to the controller's cluster model, then the solver), and checked
// against what Karpenter decides for the same objects. Every case names the
// upstream behaviour it pins (the Karpenter test file and the behaviour's
// description); the facts were read there, the cases are our own.
//
// The catalog (catalog.go) is shaped like Karpenter's fake cloud provider:
// the same instance-type names, sizes, zones test-zone-1..3, spot and
// on-demand offerings, GPU types and price formula, so a case written from
// an upstream test reads the same.
//
// Cases are grouped by theme, one file each: pod defaulting, the cluster
// model, requirements, daemonsets, volumes, topology, affinity, minValues.
package conformance
