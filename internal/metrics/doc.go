// Package metrics owns the Prometheus metrics the controllers record, under
// Karpenter's names and labels so existing dashboards and alerts work
// unchanged (the cloud provider's own metrics live in
// pkg/cloudprovider/metrics). Every method is safe on a nil *Metrics, which
// records nothing: unit tests that do not look at metrics pass nil.
package metrics
