// Command benchlive is the live benchmark behind `make bench-live`: for each
// workload size it starts a fresh test control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) with the real kwok controller,
// runs Nodewright's controller as a separate process against it, and
// measures what a user of Karpenter's kwok provider would compare:
//
//   - scale-up: N pods (1 CPU / 2 GiB) plus N/5 zone-spread pods applied,
//     the time until all of them are Running, when the last pod was created,
//     the node count and the cost ($/h) of the nodes;
//   - scale-down: both Deployments scaled to 10 %, the time of the last node
//     change once the node count has been stable for a while, the node count
//     and the cost after it;
//   - the controller's peak RSS and CPU seconds (from /proc) and its API
//     requests by verb (from its rest_client_requests_total metric, with GETs
//     split into GET, LIST and WATCH by a counting proxy in front of the
//     apiserver).
//
// It prints one table row per size beside Karpenter's reference figures and
// marks each target met or missed. It owns nothing outside this directory:
// the control plane comes from test/integration/controlplane, the instance
// types are generated here in the shape pkg/catalog reads.
package main
