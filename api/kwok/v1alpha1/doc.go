// Package v1alpha1 holds the karpenter.kwok.sh/v1alpha1 API: KWOKNodeClass, the
// NodeClass of the simulated (kwok) provider, which creates Node objects with no
// machine behind them. Wire-compatible with Karpenter's kwok provider.
//
// This package depends on apimachinery and k8s.io/api only.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.kwok.sh
package v1alpha1
