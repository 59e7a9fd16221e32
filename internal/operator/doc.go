// Package operator assembles Nodewright's controllers into one
// controller-runtime manager: informers that feed the cluster model, the
// provisioning loop, the NodeClaim lifecycle controller, and the chosen
// cloud provider (wrapped in the metrics decorator). It is the single
// composition root; `nodewright controller` parses flags into a Config and
// calls Run.
package operator
