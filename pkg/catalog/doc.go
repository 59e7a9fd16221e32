// Package catalog holds instance types and their offerings as plain values:
// what a cloud can launch, what each type offers (labels, capacity,
// allocatable) and where and at what price (zone, capacity type, price,
// availability).
//
// It reads the instance-type JSON of Karpenter's kwok provider, in both of its
// offering shapes, and the extended shape of Nodewright's AWS-like catalog
// (labels and allocatable per type). That AWS-like catalog (1,345 us-east-1
// types with on-demand list prices and synthetic spot prices) is embedded and
// is the default for `nodewright plan` and `nodewright simulate`.
//
// It imports the API types and k8s.io/api only; the solver builds its own
// indexed form from these values.
package catalog
