// Package state is Nodewright's model of the cluster: the Nodes, NodeClaims,
// pods, NodePools, DaemonSets, namespaces and storage objects that informers
// report, kept current by the controllers' event handlers (no periodic
// LISTs), and handed to the solver as a consistent snapshot.
//
// It decides which pods are provisionable (as Karpenter does: marked
// Unschedulable by kube-scheduler, not bound, not nominated, not owned by a
// DaemonSet or a Node), pairs NodeClaims with their Nodes, represents
// NodeClaims that have no Node yet as in-flight capacity, and remembers which
// pods a recent decision already planned for (nominations, with an expiry on
// the injected clock) so a later batch does not buy for them again.
// NodeClaims not launched yet are offered to provisioning as capacity on
// its way (Snapshot.Unlaunched), sized by what they asked for and carrying
// their requirements, so their pods are not bought for twice even after a
// restart forgot the nominations or a launch outlasted them. One being
// deleted takes no pods but still counts toward its pool's limits.
//
// Pods bound to a node going away (it or its NodeClaim is being deleted, or
// disruption tainted it) that will need room elsewhere are Snapshot.Evicting:
// provisioning solves for them with the pending pods, so their new room is
// on its way before they are evicted. The NodePools a decision may launch
// from (Launchable: not deleting, not static, Ready) and their usage come
// from Snapshot.Pools, for the controller and `nodewright plan` alike.
//
// The model knows whether it is complete (Synced): a new model is not,
// until its feed says so (SetSyncedFunc for the informers, MarkSynced for
// a synchronous or one-off feed); decisions wait for it. The feed also
// forgets NodeClaims and Nodes the API no longer has once they have been
// missing for a grace (ForgetMissing): a delete event that never came
// does not hold pods or limits forever.
//
// It imports no client-go or controller-runtime: it is fed plain objects and
// is tested without an API server.
package state
