package aws

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
)

// Tag keys the provider puts on what it launches.
const (
	TagNodePool  = karpv1.LabelNodePool
	TagNodeClaim = "karpenter.sh/nodeclaim"
	// TagNodeClaimUID is the UID of the NodeClaim an instance was launched
	// for: a later NodeClaim of the same name does not adopt it.
	TagNodeClaimUID = "nodewright.dev/nodeclaim-uid"
	TagNodeClass    = awsv1.Group + "/ec2nodeclass"
	TagCluster      = awsv1.Group + "/cluster"
	TagEKSCluster   = "eks:eks-cluster-name"
	tagClusterFmt   = "kubernetes.io/cluster/%s"
	providerPrefix  = "aws:///"
)

// DefaultDescribeConsistencyWindow is Options.DescribeConsistencyWindow's
// default.
const DefaultDescribeConsistencyWindow = 2 * time.Minute

// Options configure the provider.
type Options struct {
	// ClusterName tags and finds the cluster's instances (required).
	ClusterName string
	// ClusterEndpoint and ClusterCABundle (base64 PEM) go into the user
	// data nodes join the cluster with.
	ClusterEndpoint, ClusterCABundle string
	// Region is the region prices are read for (default us-east-1).
	Region string
	// ClusterCIDR is the service CIDR AL2023 nodes are told (default
	// 10.100.0.0/16).
	ClusterCIDR string
	// RefreshInterval is how long instance types, offerings and spot
	// prices are trusted before they are read again (default 10 min).
	RefreshInterval time.Duration
	// PageSize is the MaxResults of paginated describe calls (default 100).
	PageSize int32
	// OnDemandPrices are hourly on-demand prices by instance type (default:
	// the embedded catalog's): the table the Pricing API's answers
	// override, and the fallback when it cannot be reached.
	OnDemandPrices map[string]float64
	// Pricing is the Pricing API (nil: the table only).
	Pricing Pricing
	// Unavailable reports offerings recently refused for capacity (the
	// core's 3-minute cache); launches leave them out. Nil: none.
	Unavailable func(instanceType, zone, capacityType string) bool
	// DescribeConsistencyWindow bounds how long DescribeInstances may not
	// show an instance after its launch (EC2's eventual consistency). A
	// NodeClaim whose launch got IdempotentParameterMismatch moves on to
	// its next client token once this long has passed since the first
	// mismatch with no instance described for it (default 2 min).
	DescribeConsistencyWindow time.Duration
	Clock                     clock.Clock
	Log                       logr.Logger
}

// Provider is the AWS cloud provider.
type Provider struct {
	kube     client.Reader
	ec2      EC2
	opts     Options
	clock    clock.Clock
	onDemand map[string]float64
	cache    inventoryCache
	// templates are the launch templates known to exist, by name, and
	// when a launch last used each.
	templatesMu sync.Mutex
	templates   map[string]time.Time
	// attempts number the client tokens of NodeClaims whose fleets
	// launched nothing (see idempotency.go).
	attemptsMu sync.Mutex
	attempts   launchAttempts
	// described are the cluster's instances as last described, by ID.
	described struct {
		sync.Mutex
		at   time.Time
		byID map[string]ec2types.Instance
	}
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// New returns a provider that reads EC2NodeClasses through kube and calls
// EC2 through ec2api.
func New(kube client.Reader, ec2api EC2, opts Options) (*Provider, error) {
	if opts.ClusterName == "" {
		return nil, errors.New("aws provider: the cluster name is required")
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = 10 * time.Minute
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 100
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if opts.ClusterCIDR == "" {
		opts.ClusterCIDR = "10.100.0.0/16"
	}
	if opts.DescribeConsistencyWindow <= 0 {
		opts.DescribeConsistencyWindow = DefaultDescribeConsistencyWindow
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	prices := opts.OnDemandPrices
	if prices == nil {
		types, err := catalog.Default()
		if err != nil {
			return nil, fmt.Errorf("aws provider: on-demand prices: %w", err)
		}
		prices = OnDemandPrices(types)
	}
	return &Provider{kube: kube, ec2: ec2api, opts: opts, clock: opts.Clock, onDemand: prices,
		cache: inventoryCache{built: map[string]builtTypes{}}, templates: map[string]time.Time{},
		attempts: newLaunchAttempts()}, nil
}

// OnDemandPrices reads each type's on-demand price from a catalog (the
// embedded price table the Pricing API falls back to).
func OnDemandPrices(types []catalog.InstanceType) map[string]float64 {
	out := map[string]float64{}
	for _, it := range types {
		for _, o := range it.Offerings {
			if o.CapacityType == karpv1.CapacityTypeOnDemand && o.Price > 0 {
				if p, ok := out[it.Name]; !ok || o.Price < p {
					out[it.Name] = o.Price
				}
			}
		}
	}
	return out
}

// Name implements cloudprovider.CloudProvider.
func (p *Provider) Name() string { return "aws" }

// NodeClasses implements cloudprovider.CloudProvider.
func (p *Provider) NodeClasses() []schema.GroupKind {
	return []schema.GroupKind{{Group: awsv1.Group, Kind: "EC2NodeClass"}}
}

// GetInstanceTypes implements cloudprovider.CloudProvider.
func (p *Provider) GetInstanceTypes(ctx context.Context, np *karpv1.NodePool) ([]*catalog.InstanceType, error) {
	class, err := p.nodeClass(ctx, np.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return nil, fmt.Errorf("instance types of nodepool %s: %w", np.Name, err)
	}
	return p.instanceTypes(ctx, class)
}

// nodeClass reads a NodeClaim's or NodePool's EC2NodeClass and insists it
// is Ready.
func (p *Provider) nodeClass(ctx context.Context, ref *karpv1.NodeClassReference) (*awsv1.EC2NodeClass, error) {
	if ref == nil || !cloudprovider.Manages(p, ref) {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("nodeClassRef %v is not an EC2NodeClass", ref))
	}
	class := &awsv1.EC2NodeClass{}
	if err := p.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, class); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("ec2nodeclass %s not found", ref.Name))
		}
		return nil, fmt.Errorf("reading ec2nodeclass %s: %w", ref.Name, err)
	}
	ready := meta.FindStatusCondition(class.Status.Conditions, "Ready")
	switch {
	case class.DeletionTimestamp != nil:
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("ec2nodeclass %s is being deleted", ref.Name))
	case ready == nil || ready.Status != metav1.ConditionTrue:
		msg := "its status has not been resolved yet"
		if ready != nil {
			msg = ready.Message
		}
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("ec2nodeclass %s: %s", ref.Name, msg))
	}
	return class, nil
}

// ProviderID is the provider ID of an instance: aws:///ZONE/ID.
func ProviderID(zone, id string) string { return providerPrefix + zone + "/" + id }

// InstanceID reads the instance ID from a provider ID.
func InstanceID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, providerPrefix)
	i := strings.LastIndex(rest, "/")
	if !ok || i < 0 || !strings.HasPrefix(rest[i+1:], "i-") {
		return "", fmt.Errorf("provider ID %q is not aws:///ZONE/INSTANCE-ID", providerID)
	}
	return rest[i+1:], nil
}

// live: the states an instance still exists in for Nodewright.
var live = []string{"pending", "running", "stopping", "stopped", "shutting-down"}

// Get implements cloudprovider.CloudProvider.
func (p *Provider) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	in, err := p.instance(ctx, providerID)
	if err != nil {
		return nil, err
	}
	return p.asNodeClaim(ctx, in), nil
}

// instance describes one instance; a terminated or unknown one is
// NodeClaimNotFound.
func (p *Provider) instance(ctx context.Context, providerID string) (ec2types.Instance, error) {
	id, err := InstanceID(providerID)
	if err != nil {
		return ec2types.Instance{}, cloudprovider.NewNodeClaimNotFoundError(err)
	}
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		if IsErrorCode(err, "InvalidInstanceID.NotFound") {
			return ec2types.Instance{}, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s: %w", id, err))
		}
		return ec2types.Instance{}, fmt.Errorf("describing instance %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			if aws.ToString(in.InstanceId) == id && in.State != nil && in.State.Name != ec2types.InstanceStateNameTerminated {
				return in, nil
			}
		}
	}
	return ec2types.Instance{}, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s is terminated", id))
}

// List implements cloudprovider.CloudProvider: every live instance tagged
// for the cluster and a NodePool.
func (p *Provider) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	instances, err := p.describeAll(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*karpv1.NodeClaim, 0, len(instances))
	for _, in := range instances {
		out = append(out, p.asNodeClaim(ctx, in))
	}
	return out, nil
}

// describeAll describes every live instance tagged for the cluster and a
// NodePool, and keeps the answer a minute for drift checks.
func (p *Provider) describeAll(ctx context.Context) ([]ec2types.Instance, error) {
	pages := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(1000), Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + fmt.Sprintf(tagClusterFmt, p.opts.ClusterName)), Values: []string{"owned"}},
		{Name: aws.String("tag-key"), Values: []string{TagNodePool}},
		{Name: aws.String("instance-state-name"), Values: live},
	}})
	var out []ec2types.Instance
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing instances: %w", err)
		}
		for _, r := range page.Reservations {
			out = append(out, r.Instances...)
		}
	}
	byID := make(map[string]ec2types.Instance, len(out))
	for _, in := range out {
		byID[aws.ToString(in.InstanceId)] = in
	}
	p.described.Lock()
	p.described.at, p.described.byID = p.clock.Now(), byID
	p.described.Unlock()
	return out, nil
}

// describedRecently is an instance as a describeAll of the last minute
// saw it (describing them all again when older): drift checks of a
// thousand nodes cost one call a minute, not a thousand.
func (p *Provider) describedRecently(ctx context.Context, id string) (ec2types.Instance, bool, error) {
	p.described.Lock()
	fresh := p.described.byID != nil && p.clock.Since(p.described.at) < time.Minute
	in, ok := p.described.byID[id]
	p.described.Unlock()
	if fresh {
		return in, ok, nil
	}
	if _, err := p.describeAll(ctx); err != nil {
		return ec2types.Instance{}, false, err
	}
	p.described.Lock()
	defer p.described.Unlock()
	in, ok = p.described.byID[id]
	return in, ok, nil
}

// Delete implements cloudprovider.CloudProvider.
func (p *Provider) Delete(ctx context.Context, nc *karpv1.NodeClaim) error {
	in, err := p.instance(ctx, nc.Status.ProviderID)
	if err != nil {
		return err
	}
	if in.State.Name == ec2types.InstanceStateNameShuttingDown {
		return nil
	}
	if _, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{aws.ToString(in.InstanceId)}}); err != nil {
		if IsErrorCode(err, "InvalidInstanceID.NotFound") {
			return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("nodeclaim %s: %w", nc.Name, err))
		}
		return fmt.Errorf("terminating the instance of nodeclaim %s: %w", nc.Name, err)
	}
	return nil
}

// asNodeClaim is an instance as a NodeClaim: named after the NodeClaim it
// was launched for, with its provider ID, launch time, labels and (when
// its type is known) capacity.
func (p *Provider) asNodeClaim(ctx context.Context, in ec2types.Instance) *karpv1.NodeClaim {
	tags := map[string]string{}
	for _, t := range in.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	zone := ""
	if in.Placement != nil {
		zone = aws.ToString(in.Placement.AvailabilityZone)
	}
	capacityType := karpv1.CapacityTypeOnDemand
	if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		capacityType = karpv1.CapacityTypeSpot
	}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: tags[TagNodeClaim], Labels: map[string]string{
		corev1.LabelInstanceTypeStable: string(in.InstanceType), corev1.LabelTopologyZone: zone, karpv1.LabelCapacityType: capacityType,
	}}}
	if pool := tags[TagNodePool]; pool != "" {
		nc.Labels[TagNodePool] = pool
	}
	if in.LaunchTime != nil {
		nc.CreationTimestamp = metav1.NewTime(*in.LaunchTime)
	}
	nc.Status.ProviderID = ProviderID(zone, aws.ToString(in.InstanceId))
	nc.Status.ImageID = aws.ToString(in.ImageId)
	if inv, err := p.inventory(ctx); err == nil {
		if i, ok := inv.index[in.InstanceType]; ok {
			nc.Status.Capacity = capacityOf(inv.infos[i])
		}
	}
	return nc
}
