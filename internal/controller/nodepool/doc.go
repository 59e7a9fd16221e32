// Package nodepool owns a NodePool's status: ValidationSucceeded (the
// runtime checks the CRD cannot express), NodeClassReady (the referenced
// NodeClass exists, is not being deleted, and is not un-ready), Ready (both),
// and status.resources / status.nodes (the capacity and count of its nodes).
// The provisioner launches only from Ready pools.
package nodepool
