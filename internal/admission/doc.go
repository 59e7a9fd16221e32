// Package admission does to objects of Nodewright's CRDs (NodePool,
// NodeClaim, EC2NodeClass, KWOKNodeClass) what kube-apiserver does when
// they are created: fill the schema's defaults, then check the OpenAPI
// schema, the list types and the CEL rules (x-kubernetes-validations) of
// the embedded CRDs, answering with kube-apiserver's own error text. It
// runs apiextensions-apiserver's libraries over the same CRDs the binary
// installs, so `nodewright plan` and `simulate` reject offline what the API
// server would reject.
package admission
