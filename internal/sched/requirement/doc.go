// Package requirement is the label-requirement algebra of the solver: what a
// pod, a NodePool, an instance type or an offering asks of a node's labels,
// and whether two such asks can be met by one node.
//
// A Requirement constrains one label key. It is a set of acceptable values
// (finite, or the complement of a finite set), optionally bounded by integer
// limits (Gt, Lt, Gte, Lte), plus whether a node without the label is
// acceptable. That last bit is kept explicitly: NotIn and DoesNotExist accept
// an absent label, In, Exists and the integer operators do not, and the
// intersection accepts it only when both sides do. So "In [] " (nothing fits)
// and DoesNotExist (only an absent label fits) stay distinct.
//
// Requirements is a set of Requirement keyed by label key, with beta label
// keys normalized to their GA names. Adding a requirement for a key already
// present intersects the two. Operations are linear in the number of keys and
// values; value sets are sorted slices, so intersections are merges.
package requirement
