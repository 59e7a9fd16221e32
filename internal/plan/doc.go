// Package plan is `nodewright plan`, the dry run: it turns manifests (NodePools,
// NodeClasses, Nodes, pods and workloads) and an instance-type catalog into the
// solver's input, runs the same solver the controller runs, and renders the
// decision as a table or as stable JSON.
package plan
