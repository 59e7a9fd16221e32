// Package manifest reads Kubernetes manifests (YAML or JSON, many documents
// per file, files or directories) into typed objects: Nodewright's own kinds
// (NodePool, NodeClaim, EC2NodeClass, KWOKNodeClass) and the core kinds a
// dry run or a simulation needs (Nodes, Pods, Deployments, ReplicaSets,
// StatefulSets, Jobs, DaemonSets). Workloads are expanded into the pods their
// controllers would create.
//
// Decoding is strict, as `kubectl apply` is: an unknown field, an invalid
// quantity or an unknown kind is an error naming the file, the document and
// the object.
package manifest
