// Package v1 holds the karpenter.k8s.aws/v1 API: EC2NodeClass, the AWS side of
// a node (AMIs, subnets, security groups, IAM role, block devices, user data,
// kubelet settings). The types are wire-compatible with Karpenter's AWS
// provider v1; the kubebuilder markers here are the source of the CRD schema
// and its CEL rules.
//
// This package depends on apimachinery and k8s.io/api only.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.k8s.aws
package v1
