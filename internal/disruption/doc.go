// Package disruption owns Nodewright's decisions to remove nodes: which
// NodeClaims are candidates and why others are not (do-not-disrupt pods
// and nodes, nodes still starting or already going), when a NodeClaim is
// consolidatable (consolidateAfter since its last pod event), how many
// nodes each NodePool's budgets allow to disrupt now (counts and
// percentages, cron windows in UTC, per reason; the most restrictive active
// budget wins), and the methods: emptiness (delete empty consolidatable
// nodes within the budget), consolidation (delete the nodes whose pods fit
// elsewhere, chosen so that what stays costs least, else merge or replace
// nodes by one cheaper NodeClaim), drift, and expiration (delete
// NodeClaims older than expireAfter, forcefully, outside budgets).
//
// It is pure: plain values in, decisions out, with the time passed in. It
// imports no client-go, controller-runtime or prometheus; the controller in
// internal/controller/disruption loads, calls it and acts.
package disruption
