// Package provisioning owns the decision to buy nodes. It batches pod events
// (a window opens on the first provisionable pod and closes after an idle
// gap or a maximum length), takes a snapshot of the cluster model, asks the
// provider for each NodePool's instance types, runs the solver, and creates
// the NodeClaims the plan calls for, as Karpenter writes them (owned by their
// NodePool, with its template's labels, taints and NodeClass), several at
// once (one failing stops none of the others). No window waits for the
// NodeClaims still launching: they are capacity on its way, and pods with no
// room on them get new NodeClaims in that window's decision. Pods the plan
// placed are nominated so the next batch does not buy for them again; pods it
// could not place get a FailedScheduling event carrying the solver's reason.
package provisioning
