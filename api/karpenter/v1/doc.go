// Package v1 holds the karpenter.sh/v1 API: NodePool (the rules a platform team
// writes) and NodeClaim (one request for one node). The types are wire-compatible
// with Karpenter v1 so that manifests written for Karpenter apply unchanged; the
// kubebuilder markers here are the single source of the CRD schemas, defaults and
// CEL validation rules in api/crds.
//
// This package depends on apimachinery and k8s.io/api only.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1
