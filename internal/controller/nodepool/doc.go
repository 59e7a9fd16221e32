// Package nodepool owns a NodePool's status: ValidationSucceeded (the
// runtime checks the CRD cannot express), NodeClassReady (the referenced
// NodeClass exists, is not being deleted, and is not un-ready), Ready (both),
// and status.resources / status.nodes (the capacity and count of its nodes).
// The provisioner launches only from Ready pools. Status is written as a
// merge patch of these fields only; resources and nodes at most once per
// StatusInterval (a burst of node changes makes one write), condition
// changes at once.
//
// It also owns the template hash (karpenter.sh/nodepool-hash and
// karpenter.sh/nodepool-hash-version, as Karpenter writes them): Hash
// fingerprints spec.template minus requirements, resources and budgets; the
// pool carries the current hash, each NodeClaim the hash it was created
// from, and a change of HashVersion re-stamps older NodeClaims rather than
// drifting them.
package nodepool
