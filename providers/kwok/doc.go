// Package kwok is the simulated cloud provider, serving KWOKNodeClass: its
// "instances" are Node objects with no machine behind them, so Nodewright can
// run end to end against any API server (and in the simulator) without a
// cloud. Instance types come from a catalog (the embedded AWS-like one by
// default). Create picks the cheapest offering the NodeClaim allows and
// creates a Node with providerID kwok://<name>, the labels of the chosen
// type, zone and capacity type, capacity and allocatable, and the
// karpenter.sh/unregistered:NoExecute taint; Delete deletes the Node. For
// tests, offerings can be made to fail with insufficient capacity.
package kwok
