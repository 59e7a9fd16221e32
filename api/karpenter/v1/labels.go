package v1

import corev1 "k8s.io/api/core/v1"

// Well-known label keys. Karpenter and Nodewright write these on NodeClaims and
// Nodes; pods may select on them.
const (
	LabelNodePool        = Group + "/nodepool"
	LabelCapacityType    = Group + "/capacity-type"
	LabelNodeRegistered  = Group + "/registered"
	LabelNodeInitialized = Group + "/initialized"
	LabelDoNotSyncTaints = Group + "/do-not-sync-taints"

	CapacityTypeOnDemand = "on-demand"
	CapacityTypeSpot     = "spot"
	CapacityTypeReserved = "reserved"
)

// Annotation keys.
const (
	AnnotationDoNotDisrupt              = Group + "/do-not-disrupt"
	AnnotationNodePoolHash              = Group + "/nodepool-hash"
	AnnotationNodePoolHashVersion       = Group + "/nodepool-hash-version"
	AnnotationNodeClaimTerminationTime  = Group + "/nodeclaim-termination-timestamp"
	AnnotationNodeClaimMinValuesRelaxed = Group + "/nodeclaim-min-values-relaxed"
)

// Taint keys and the taints Nodewright places on nodes.
const (
	TaintKeyDisrupted    = Group + "/disrupted"
	TaintKeyUnregistered = Group + "/unregistered"
)

var (
	// DisruptedNoScheduleTaint marks a node that is being disrupted.
	DisruptedNoScheduleTaint = corev1.Taint{Key: TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}
	// UnregisteredNoExecuteTaint is registered with every new node and removed once
	// Nodewright has synced the NodeClaim's labels and taints onto it.
	UnregisteredNoExecuteTaint = corev1.Taint{Key: TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}
)

// TerminationFinalizer is placed on NodeClaims and Nodes so that the instance is
// released only after the node has been drained.
const TerminationFinalizer = Group + "/termination"

// Beta-era label keys that are normalized to their GA names wherever
// requirements are compared.
var NormalizedLabels = map[string]string{
	"failure-domain.beta.kubernetes.io/zone":   corev1.LabelTopologyZone,
	"failure-domain.beta.kubernetes.io/region": corev1.LabelTopologyRegion,
	"beta.kubernetes.io/arch":                  corev1.LabelArchStable,
	"beta.kubernetes.io/os":                    corev1.LabelOSStable,
	"beta.kubernetes.io/instance-type":         corev1.LabelInstanceTypeStable,
}
