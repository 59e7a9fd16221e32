// Package api is the root of Nodewright's API: karpenter/v1 (NodePool,
// NodeClaim), aws/v1 (EC2NodeClass), kwok/v1alpha1 (KWOKNodeClass) and crds
// (the generated CustomResourceDefinitions, embedded). Its tests hold the
// rules that span those packages, such as their dependency budget.
package api
