// Package sched is Nodewright's provisioning solver: given the pods that
// kube-scheduler could not place, the existing nodes, in-flight NodeClaims,
// NodePools and their instance types, it decides which nodes to buy.
//
// It is pure: no client-go, controller-runtime or prometheus (a test enforces
// the dependency budget), no clocks, no I/O. The same code serves the live
// controller, `nodewright plan` and `nodewright simulate`.
//
// Subpackages own one concept each:
//
//	requirement  label-requirement algebra (In, NotIn, Exists, DoesNotExist,
//	             Gt, Lt, Gte, Lte; intersection, compatibility, minValues)
package sched
