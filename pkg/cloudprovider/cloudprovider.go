package cloudprovider

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// CloudProvider launches and manages the instances behind NodeClaims.
type CloudProvider interface {
	// Name identifies the provider (the `provider` label of metrics).
	Name() string
	// Create launches one instance that satisfies the NodeClaim's
	// requirements and resource requests. It returns the NodeClaim as
	// launched: status.providerID (required), status.capacity and
	// allocatable, and labels for the chosen instance type, zone and capacity
	// type. Errors: InsufficientCapacityError when no offering can be
	// launched, NodeClassNotReadyError when the NodeClass is not ready.
	Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	// Delete terminates the NodeClaim's instance. It returns nil while
	// termination is under way and NodeClaimNotFoundError once it is gone.
	Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error
	// Get finds an instance by provider ID, or NodeClaimNotFoundError.
	Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error)
	// List returns every instance the provider manages for this cluster,
	// each as a NodeClaim named after the NodeClaim it was launched for,
	// with its provider ID and its launch time as creation timestamp
	// (garbage collection relies on all three).
	List(ctx context.Context) ([]*karpv1.NodeClaim, error)
	// GetInstanceTypes returns the instance types the NodePool's NodeClass can
	// launch, including those with no offering available right now.
	GetInstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*catalog.InstanceType, error)
	// IsDrifted returns why an instance no longer matches its NodeClass, or
	// "" when it does.
	IsDrifted(ctx context.Context, nodeClaim *karpv1.NodeClaim) (DriftReason, error)
	// NodeClasses are the NodeClass kinds the provider serves; NodePools and
	// NodeClaims referring to any other kind are not Nodewright's to manage.
	NodeClasses() []schema.GroupKind
}

// DriftReason says why an instance has drifted, e.g. "AMIDrift".
type DriftReason string

// RepairPolicySource is an optional capability: node conditions that mark a
// node for repair once they have lasted TolerationDuration.
type RepairPolicySource interface {
	RepairPolicies() []RepairPolicy
}

// RepairPolicy is one unhealthy node condition.
type RepairPolicy struct {
	ConditionType      corev1.NodeConditionType
	ConditionStatus    corev1.ConditionStatus
	TolerationDuration time.Duration
}

// Manages reports whether a NodeClass reference is one of the provider's.
func Manages(p CloudProvider, ref *karpv1.NodeClassReference) bool {
	if ref == nil {
		return false
	}
	for _, gk := range p.NodeClasses() {
		if gk.Group == ref.Group && gk.Kind == ref.Kind {
			return true
		}
	}
	return false
}
