package kwok

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	kwokv1alpha1 "github.com/nodewright/nodewright/api/kwok/v1alpha1"
	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
)

const (
	// ProviderIDPrefix starts every kwok provider ID.
	ProviderIDPrefix = "kwok://"
	// NodeAnnotation and NodeLabel mark nodes the kwok provider made.
	NodeAnnotation = "kwok.x-k8s.io/node"
	// PriceLabel carries the launched offering's price, for dashboards.
	PriceLabel = "eks-node-viewer/instance-price"
	// NodeClaimUIDAnnotation is the UID of the NodeClaim a Node was made
	// for: a later NodeClaim of the same name does not adopt it.
	NodeClaimUIDAnnotation = "nodewright.dev/nodeclaim-uid"
)

// Provider is the kwok cloud provider.
type Provider struct {
	kube  client.Client
	types []*catalog.InstanceType
	// labels[i] are types[i]'s labels as requirements, built once.
	labels []requirement.Requirements

	mu sync.Mutex
	// refused offerings fail Create with insufficient capacity (tests).
	refused map[cloudprovider.Offering]bool
	// alsoEC2: NodePools naming an EC2NodeClass launch kwok nodes too.
	alsoEC2 bool
}

// ServeEC2NodeClasses has the provider launch kwok nodes for NodePools whose
// nodeClassRef names an EC2NodeClass, as if it were AWS (the simulator
// plays AWS manifests this way). The EC2NodeClass must exist; its Ready
// condition is honoured as a KWOKNodeClass's is.
func (p *Provider) ServeEC2NodeClasses() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.alsoEC2 = true
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// New returns a provider that launches the given instance types as Nodes
// through kube.
func New(kube client.Client, types []catalog.InstanceType) *Provider {
	p := &Provider{kube: kube, refused: map[cloudprovider.Offering]bool{}}
	for i := range types {
		p.types = append(p.types, &types[i])
		p.labels = append(p.labels, requirement.FromLabels(types[i].Labels))
	}
	return p
}

// RefuseOffering makes Create fail with insufficient capacity for an
// offering (instance type, zone, capacity type) until AllowOffering.
func (p *Provider) RefuseOffering(o cloudprovider.Offering) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused[o] = true
}

// AllowOffering undoes RefuseOffering.
func (p *Provider) AllowOffering(o cloudprovider.Offering) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.refused, o)
}

func (p *Provider) isRefused(o cloudprovider.Offering) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused[o]
}

// Name implements cloudprovider.CloudProvider.
func (p *Provider) Name() string { return "kwok" }

// NodeClasses implements cloudprovider.CloudProvider.
func (p *Provider) NodeClasses() []schema.GroupKind {
	out := []schema.GroupKind{{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass"}}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.alsoEC2 {
		out = append(out, schema.GroupKind{Group: awsv1.Group, Kind: "EC2NodeClass"})
	}
	return out
}

// GetInstanceTypes returns the catalog: the same types for every NodePool.
func (p *Provider) GetInstanceTypes(context.Context, *karpv1.NodePool) ([]*catalog.InstanceType, error) {
	return p.types, nil
}

// IsDrifted: kwok nodes drift only as the core decides (NodePool changes).
func (p *Provider) IsDrifted(context.Context, *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	return "", nil
}

// Create picks the cheapest offering the NodeClaim allows and creates its
// Node, named after the NodeClaim. Creating again for the same NodeClaim
// (after a lost answer, a failed status write, a restart) returns the
// existing Node: one instance per NodeClaim. The Node records the
// NodeClaim's UID (NodeClaimUIDAnnotation). A Node of that name that is
// being deleted, or that was made for another NodeClaim of the same name
// (registered or not), is not adopted: Create fails until it is gone.
func (p *Provider) Create(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	if err := p.checkNodeClass(ctx, nc); err != nil {
		return nil, err
	}
	existing := &corev1.Node{}
	if err := p.kube.Get(ctx, client.ObjectKey{Name: nc.Name}, existing); err == nil {
		return adopt(existing, nc)
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
	}
	it, offering, err := p.choose(nc)
	if err != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
	}
	node := p.node(nc, it, offering)
	if err := p.kube.Create(ctx, node); err != nil {
		if apierrors.IsAlreadyExists(err) {
			if err := p.kube.Get(ctx, client.ObjectKey{Name: nc.Name}, node); err != nil {
				return nil, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
			}
			return adopt(node, nc)
		}
		return nil, fmt.Errorf("launching nodeclaim %s: creating node: %w", nc.Name, err)
	}
	return fromNode(node, nc), nil
}

// adopt returns the Node already made for a NodeClaim as its launch, unless
// it is going away or was made for another NodeClaim of the same name (its
// UID annotation, or once registered its owner reference, names another).
func adopt(node *corev1.Node, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	if node.DeletionTimestamp != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: node %s of the same name is being deleted", nc.Name, node.Name)
	}
	if uid, ok := node.Annotations[NodeClaimUIDAnnotation]; ok && nc.UID != "" && uid != string(nc.UID) {
		return nil, fmt.Errorf("launching nodeclaim %s: node %s was made for another nodeclaim of the same name (annotation %s: uid %s)",
			nc.Name, node.Name, NodeClaimUIDAnnotation, uid)
	}
	for _, o := range node.OwnerReferences {
		if o.Kind == "NodeClaim" && nc.UID != "" && o.UID != nc.UID {
			return nil, fmt.Errorf("launching nodeclaim %s: node %s belongs to another nodeclaim of the same name (uid %s)", nc.Name, node.Name, o.UID)
		}
	}
	return fromNode(node, nc), nil
}

// checkNodeClass: a missing KWOKNodeClass is insufficient capacity (as in
// Karpenter: nothing can be launched for it); one whose Ready condition is
// False is not ready. No Ready condition counts as ready.
func (p *Provider) checkNodeClass(ctx context.Context, nc *karpv1.NodeClaim) error {
	ref := nc.Spec.NodeClassRef
	if ref == nil || !cloudprovider.Manages(p, ref) {
		return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("nodeclaim %s: nodeClassRef %v is not a KWOKNodeClass", nc.Name, ref))
	}
	var conditions *[]metav1.Condition
	var class client.Object
	if ref.Kind == "EC2NodeClass" {
		c := &awsv1.EC2NodeClass{}
		class, conditions = c, &c.Status.Conditions
	} else {
		c := &kwokv1alpha1.KWOKNodeClass{}
		class, conditions = c, &c.Status.Conditions
	}
	if err := p.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, class); err != nil {
		if apierrors.IsNotFound(err) {
			return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("nodeclaim %s: %s %s not found", nc.Name, ref.Kind, ref.Name))
		}
		return fmt.Errorf("nodeclaim %s: reading %s %s: %w", nc.Name, ref.Kind, ref.Name, err)
	}
	if c := meta.FindStatusCondition(*conditions, karpv1.ConditionTypeReady); c != nil && c.Status == metav1.ConditionFalse {
		return cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("%s %s: %s", ref.Kind, ref.Name, c.Message))
	}
	return nil
}

// choose returns the cheapest offering, among the NodeClaim's instance types,
// that its requirements allow and that holds its requests.
func (p *Provider) choose(nc *karpv1.NodeClaim) (*catalog.InstanceType, catalog.Offering, error) {
	reqs, err := requirement.FromAPI(nc.Spec.Requirements)
	if err != nil {
		return nil, catalog.Offering{}, err
	}
	type pick struct {
		it *catalog.InstanceType
		o  catalog.Offering
	}
	var picks []pick
	var refused []cloudprovider.Offering
	zones, zoneSet := reqs.Get(corev1.LabelTopologyZone)
	capacityTypes, ctSet := reqs.Get(karpv1.LabelCapacityType)
	allows := func(r requirement.Requirement, ok bool, v string) bool { return !ok || r.Has(v) }
	for i, it := range p.types {
		// The type's own labels first (once per type), then each
		// offering's zone and capacity type.
		if !it.Holds(nc.Spec.Resources.Requests) || reqs.Intersects(p.labels[i]) != nil {
			continue
		}
		for _, o := range it.Offerings {
			if !o.Available || !allows(zones, zoneSet, o.Zone) || !allows(capacityTypes, ctSet, o.CapacityType) {
				continue
			}
			key := cloudprovider.Offering{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}
			if p.isRefused(key) {
				refused = append(refused, key)
				continue
			}
			picks = append(picks, pick{it, o})
		}
	}
	if len(picks) == 0 {
		return nil, catalog.Offering{}, cloudprovider.NewInsufficientCapacityError(errors.New("no available offering satisfies the requirements"), refused...)
	}
	best := slices.MinFunc(picks, func(a, b pick) int {
		return cmp.Or(cmp.Compare(a.o.Price, b.o.Price), cmp.Compare(a.it.Name, b.it.Name), cmp.Compare(a.o.Zone, b.o.Zone), cmp.Compare(a.o.CapacityType, b.o.CapacityType))
	})
	return best.it, best.o, nil
}

// offeringLabels: the labels a node of this type launched from this
// offering carries.
func offeringLabels(it *catalog.InstanceType, o catalog.Offering) map[string]string {
	labels := make(map[string]string, len(it.Labels)+3)
	for k, v := range it.Labels {
		labels[k] = v
	}
	labels[corev1.LabelTopologyZone] = o.Zone
	labels[karpv1.LabelCapacityType] = o.CapacityType
	return labels
}

// node builds the Node for a NodeClaim launched as it, from offering o.
func (p *Provider) node(nc *karpv1.NodeClaim, it *catalog.InstanceType, o catalog.Offering) *corev1.Node {
	labels := offeringLabels(it, o)
	for _, r := range nc.Spec.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			if _, set := labels[r.Key]; !set {
				labels[r.Key] = r.Values[0]
			}
		}
	}
	for k, v := range nc.Labels {
		labels[k] = v
	}
	labels[corev1.LabelHostname] = nc.Name
	labels[NodeAnnotation] = "fake"
	labels[PriceLabel] = fmt.Sprintf("%g", o.Price)
	annotations := map[string]string{NodeAnnotation: "fake"}
	if nc.UID != "" {
		annotations[NodeClaimUIDAnnotation] = string(nc.UID)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nc.Name, Labels: labels, Annotations: annotations},
		Spec: corev1.NodeSpec{
			ProviderID: ProviderIDPrefix + nc.Name,
			Taints:     []corev1.Taint{karpv1.UnregisteredNoExecuteTaint},
		},
		Status: corev1.NodeStatus{Capacity: it.Capacity.DeepCopy(), Allocatable: it.Allocatable.DeepCopy(), Phase: corev1.NodePending},
	}
}

// fromNode renders a kwok Node as the NodeClaim a launch returns; base, when
// given, supplies the NodeClaim's own metadata and spec.
func fromNode(n *corev1.Node, base *karpv1.NodeClaim) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{}
	if base != nil {
		nc = base.DeepCopy()
	} else {
		nc.Name = n.Name
		nc.CreationTimestamp = n.CreationTimestamp
		nc.DeletionTimestamp = n.DeletionTimestamp
	}
	if nc.Labels == nil {
		nc.Labels = map[string]string{}
	}
	for k, v := range n.Labels {
		if k != corev1.LabelHostname && k != NodeAnnotation {
			nc.Labels[k] = v
		}
	}
	nc.Status.ProviderID = n.Spec.ProviderID
	nc.Status.ImageID = "kwok"
	nc.Status.Capacity = n.Status.Capacity.DeepCopy()
	nc.Status.Allocatable = n.Status.Allocatable.DeepCopy()
	return nc
}

// Delete deletes the Node; the instance is gone at once, so it reports
// NodeClaimNotFoundError.
func (p *Provider) Delete(ctx context.Context, nc *karpv1.NodeClaim) error {
	name, ok := nodeName(nc.Status.ProviderID)
	if !ok {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("nodeclaim %s has no kwok provider ID", nc.Name))
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := p.kube.Delete(ctx, node); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting node %s of nodeclaim %s: %w", name, nc.Name, err)
	}
	return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s terminated", nc.Status.ProviderID))
}

// Get finds the Node of a provider ID.
func (p *Provider) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	name, ok := nodeName(providerID)
	if !ok {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("%q is not a kwok provider ID", providerID))
	}
	node := &corev1.Node{}
	if err := p.kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", providerID))
		}
		return nil, fmt.Errorf("getting instance %s: %w", providerID, err)
	}
	if node.DeletionTimestamp != nil {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s is terminating", providerID))
	}
	return fromNode(node, nil), nil
}

// List returns every kwok Node as a NodeClaim.
func (p *Provider) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	nodes := &corev1.NodeList{}
	// Read only: fromNode copies what it keeps.
	if err := p.kube.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var out []*karpv1.NodeClaim
	for i := range nodes.Items {
		if strings.HasPrefix(nodes.Items[i].Spec.ProviderID, ProviderIDPrefix) {
			out = append(out, fromNode(&nodes.Items[i], nil))
		}
	}
	return out, nil
}

func nodeName(providerID string) (string, bool) {
	name, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	return name, ok && name != ""
}
