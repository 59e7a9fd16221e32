// Package garbagecollection reconciles the cloud's instances with the
// cluster's NodeClaims, both ways:
//
//   - an instance that no NodeClaim owns (none has its provider ID, and the
//     NodeClaim it was launched for is gone) is terminated once it is older
//     than MinInstanceAge, so a crash between launch and recording the
//     provider ID never leaks a paid-for machine;
//   - a registered NodeClaim whose instance the provider no longer lists is
//     deleted unless its Node is still Ready, so the cluster stops counting
//     capacity that does not exist. Termination then clears its finalizers.
//
// Decide is a pure function of the provider's instances, the NodeClaims, the
// Nodes and the time; Collector loads, decides and acts, and Runnable runs it
// on the leader every 10 s for its first 20 rounds, then every 2 minutes.
package garbagecollection
