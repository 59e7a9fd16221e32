// Package nodeclaim owns a NodeClaim's life from creation to a ready node:
// the termination finalizer first, then launch through the cloud provider,
// registration (the Node with the claim's provider ID gets the claim's
// labels, taints, owner and finalizer, and loses the unregistered taint),
// initialization (Ready, startup and ephemeral taints gone, requested
// extended resources registered), and liveness (a claim not launched within
// 5 minutes or not registered within 15 is deleted). Decisions are pure
// functions of the claim, its node and the time; the reconciler loads,
// decides and acts. Deleting claims is the termination controller's.
//
// Writes are merge patches of the fields the controller owns (the
// finalizer, the provider's labels, the launch's providerID, image,
// capacity and allocatable, the node name, the lifecycle conditions, the
// node's registration fields), made only when something changed, locked
// when they carry a list and made again on a fresh copy after a conflict
// (see fieldpatch); a conflict that persists requeues the claim without an
// error.
package nodeclaim
