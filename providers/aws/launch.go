package aws

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	"github.com/nodewright/nodewright/providers/aws/instancetype"
)

// labelZoneID is the zone ID label of a launched NodeClaim.
const labelZoneID = "topology.k8s.aws/zone-id"

// MaxInstanceTypes is how many instance types one launch offers EC2 (the
// cheapest that fit), as Karpenter.
const MaxInstanceTypes = 60

// launchOption is one instance type in one zone at a price.
type launchOption struct {
	it    *catalog.InstanceType
	zone  string
	price float64
}

// Create implements cloudprovider.CloudProvider: one instant EC2 Fleet
// over the NodeClaim's compatible instance types × its NodeClass's subnets,
// spot when the NodeClaim allows it and a spot offering exists
// (price-capacity-optimized), else on-demand (lowest-price). It launches
// at most one instance per NodeClaim, however often it is called: an
// instance already launched for the NodeClaim is returned, and the fleet
// carries a client token (see idempotency.go).
func (p *Provider) Create(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	class, err := p.nodeClass(ctx, nc.Spec.NodeClassRef)
	if err != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
	}
	types, err := p.instanceTypes(ctx, class)
	if err != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
	}
	// No instance of the NodeClaim's launched before describedAt is
	// unseen by launchedFor once the describe-consistency window passed.
	describedAt := p.clock.Now()
	existing, err := p.launchedFor(ctx, nc)
	if err != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
	}
	if existing != nil {
		return p.adopt(class, nc, types, existing)
	}
	reqs, err := requirement.FromAPI(nc.Spec.Requirements)
	if err != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: spec.requirements: %w", nc.Name, err)
	}
	capacityType, options := chooseOptions(types, reqs, nc.Spec.Resources.Requests, p.opts.Unavailable)
	if len(options) == 0 {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("launching nodeclaim %s: no instance type of ec2nodeclass %s meets its requirements and requests", nc.Name, class.Name))
	}
	byImage, err := p.groupByImage(class, options)
	if err != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
	}
	var configs []ec2types.FleetLaunchTemplateConfigRequest
	for _, amiID := range sortedImageIDs(byImage) {
		name, err := p.ensureLaunchTemplate(ctx, class, nc, amiID)
		if err != nil {
			return nil, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
		}
		cfg := ec2types.FleetLaunchTemplateConfigRequest{LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
			LaunchTemplateName: aws.String(name), Version: aws.String("$Latest")}}
		for _, o := range byImage[amiID] {
			cfg.Overrides = append(cfg.Overrides, ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType: ec2types.InstanceType(o.it.Name), SubnetId: aws.String(subnetIn(class, o.zone)), AvailabilityZone: aws.String(o.zone)})
		}
		configs = append(configs, cfg)
	}
	in := &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant, LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(capacityType)},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: p.tags(class, nc)},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: p.tags(class, nc)},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: p.tags(class, nc)},
		},
	}
	if capacityType == karpv1.CapacityTypeSpot {
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	f := fleet{nc: nc, class: class, in: in, capacityType: capacityType, options: options, byImage: byImage, describedAt: describedAt}
	for try := 1; ; try++ {
		out, retry, err := p.createFleet(ctx, f)
		if retry && try < maxFleetTries {
			continue
		}
		return out, err
	}
}

// maxFleetTries bounds the fleets one Create sends: a token known to have
// launched nothing alive is followed by the next at once, a few times.
const maxFleetTries = 3

// fleet is one NodeClaim's fleet request and what its answer is read with.
type fleet struct {
	nc           *karpv1.NodeClaim
	class        *awsv1.EC2NodeClass
	in           *ec2.CreateFleetInput
	capacityType string
	options      []launchOption
	byImage      map[string][]launchOption
	// describedAt is when launchedFor last found no instance for the
	// NodeClaim.
	describedAt time.Time
}

// createFleet sends the fleet under the NodeClaim's current client token.
// retry says the token launched nothing alive, so the next token may be
// tried at once.
func (p *Provider) createFleet(ctx context.Context, f fleet) (launched *karpv1.NodeClaim, retry bool, err error) {
	nc := f.nc
	token := p.clientToken(nc)
	f.in.ClientToken = aws.String(token)
	out, err := p.ec2.CreateFleet(ctx, f.in)
	if IsErrorCode(err, "IdempotentParameterMismatch") {
		// An earlier attempt with this token asked for something else and
		// may have launched an instance EC2 does not describe yet. It was
		// launched before the first refusal, so once the window passed
		// since then, launchedFor would have found it were it alive.
		until := p.mismatchedSince(nc, token).Add(p.opts.DescribeConsistencyWindow)
		if f.describedAt.Before(until) {
			return nil, false, fmt.Errorf("launching nodeclaim %s: an earlier launch (client token %s) asked for other offerings and may have launched an instance not described yet; waiting for it until %s: %w",
				nc.Name, token, until.UTC().Format(time.RFC3339), err)
		}
		p.launchedNothing(nc)
		return nil, true, fmt.Errorf("launching nodeclaim %s: the earlier launch with client token %s launched nothing alive: %w", nc.Name, token, err)
	}
	if err != nil {
		return nil, false, fmt.Errorf("launching nodeclaim %s: creating fleet: %w", nc.Name, err)
	}
	for _, instances := range out.Instances {
		if len(instances.InstanceIds) == 0 {
			continue
		}
		zone := ""
		if instances.LaunchTemplateAndOverrides != nil && instances.LaunchTemplateAndOverrides.Overrides != nil {
			zone = aws.ToString(instances.LaunchTemplateAndOverrides.Overrides.AvailabilityZone)
		}
		i := slices.IndexFunc(f.options, func(o launchOption) bool {
			return o.it.Name == string(instances.InstanceType) && (zone == "" || o.zone == zone)
		})
		if i < 0 {
			return nil, false, fmt.Errorf("launching nodeclaim %s: EC2 launched %s in %q, which was not asked for", nc.Name, instances.InstanceType, zone)
		}
		id := instances.InstanceIds[0]
		dead, err := p.deadOnArrival(ctx, nc, id)
		if err != nil {
			return nil, false, err
		}
		if dead {
			p.launchedNothing(nc)
			return nil, true, fmt.Errorf("launching nodeclaim %s: client token %s answered with instance %s, which is shutting down or terminated", nc.Name, token, id)
		}
		p.launchSettled(nc)
		return p.launched(f.class, nc, f.options[i], f.capacityType, id, imageFor(f.byImage, f.options[i])), false, nil
	}
	// Insufficient capacity is final for the token too: should the
	// NodeClaim be launched again (its deletion failed), the next token
	// asks afresh instead of being refused for other parameters.
	p.launchedNothing(nc)
	return nil, false, p.fleetError(nc, f.capacityType, out.Errors)
}

// chooseOptions picks the capacity type (spot when allowed and offered)
// and the launch options of the cheapest MaxInstanceTypes types that meet
// the requirements and hold the requests, leaving out offerings recently
// refused for capacity.
func chooseOptions(types []*catalog.InstanceType, reqs requirement.Requirements, requests corev1.ResourceList,
	unavailable func(instanceType, zone, capacityType string) bool) (string, []launchOption) {
	zones, zoneSet := reqs.Get(corev1.LabelTopologyZone)
	capacityTypes, ctSet := reqs.Get(karpv1.LabelCapacityType)
	allows := func(r requirement.Requirement, set bool, v string) bool { return !set || r.Has(v) }
	byType := map[string][]launchOption{}
	var all []launchOption
	for _, it := range types {
		if !it.Holds(requests) || reqs.Intersects(requirement.FromLabels(it.Labels)) != nil {
			continue
		}
		for _, o := range it.Offerings {
			if o.Available && allows(zones, zoneSet, o.Zone) && allows(capacityTypes, ctSet, o.CapacityType) &&
				(unavailable == nil || !unavailable(it.Name, o.Zone, o.CapacityType)) {
				opt := launchOption{it: it, zone: o.Zone, price: o.Price}
				byType[o.CapacityType] = append(byType[o.CapacityType], opt)
				all = append(all, opt)
			}
		}
	}
	capacityType := karpv1.CapacityTypeOnDemand
	if len(byType[karpv1.CapacityTypeSpot]) > 0 {
		capacityType = karpv1.CapacityTypeSpot
	}
	options := byType[capacityType]
	slices.SortFunc(options, func(a, b launchOption) int {
		return cmp.Or(cmp.Compare(a.price, b.price), cmp.Compare(a.it.Name, b.it.Name), cmp.Compare(a.zone, b.zone))
	})
	var kept []string
	out := options[:0]
	for _, o := range options {
		if !slices.Contains(kept, o.it.Name) {
			if len(kept) == MaxInstanceTypes {
				continue
			}
			kept = append(kept, o.it.Name)
		}
		out = append(out, o)
	}
	return capacityType, out
}

// groupByImage gives each option the newest non-deprecated image of the
// NodeClass that boots its type (a deprecated one when none other does).
func (p *Provider) groupByImage(class *awsv1.EC2NodeClass, options []launchOption) (map[string][]launchOption, error) {
	type image struct {
		id         string
		deprecated bool
		reqs       requirement.Requirements
	}
	var images []image
	for _, ami := range class.Status.AMIs {
		reqs, err := requirement.FromNodeSelector(ami.Requirements)
		if err != nil {
			return nil, fmt.Errorf("ec2nodeclass %s: status.amis %s: %w", class.Name, ami.ID, err)
		}
		images = append(images, image{ami.ID, ami.Deprecated, reqs})
	}
	// Status order is the resolver's (newest first); non-deprecated first.
	slices.SortStableFunc(images, func(a, b image) int {
		if a.deprecated == b.deprecated {
			return 0
		}
		if a.deprecated {
			return 1
		}
		return -1
	})
	out := map[string][]launchOption{}
	for _, o := range options {
		for _, im := range images {
			if im.reqs.Matches(o.it.Labels) == nil {
				out[im.id] = append(out[im.id], o)
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ec2nodeclass %s: no image in status.amis boots any of the instance types", class.Name)
	}
	return out, nil
}

func sortedImageIDs(m map[string][]launchOption) []string {
	return slices.Sorted(maps.Keys(m))
}

func imageFor(byImage map[string][]launchOption, o launchOption) string {
	for id, opts := range byImage {
		if slices.ContainsFunc(opts, func(x launchOption) bool { return x.it == o.it && x.zone == o.zone }) {
			return id
		}
	}
	return ""
}

// subnetIn is the NodeClass's subnet in a zone with the most free
// addresses (status lists them that way).
func subnetIn(class *awsv1.EC2NodeClass, zone string) string {
	for _, s := range class.Status.Subnets {
		if s.Zone == zone {
			return s.ID
		}
	}
	return ""
}

// tags are what every launched resource carries: the user's, then the
// cluster's and the NodeClaim's (which the user cannot override).
func (p *Provider) tags(class *awsv1.EC2NodeClass, nc *karpv1.NodeClaim) []ec2types.Tag {
	m := maps.Clone(class.Spec.Tags)
	if m == nil {
		m = map[string]string{}
	}
	m[fmt.Sprintf(tagClusterFmt, p.opts.ClusterName)] = "owned"
	m[TagEKSCluster] = p.opts.ClusterName
	m[TagNodePool] = nc.Labels[karpv1.LabelNodePool]
	m[TagNodeClaim] = nc.Name
	if nc.UID != "" {
		m[TagNodeClaimUID] = string(nc.UID)
	}
	m[TagNodeClass] = class.Name
	if _, ok := m["Name"]; !ok {
		m["Name"] = nc.Name
	}
	out := make([]ec2types.Tag, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

// launched is the NodeClaim as launched.
func (p *Provider) launched(class *awsv1.EC2NodeClass, nc *karpv1.NodeClaim, o launchOption, capacityType, id, image string) *karpv1.NodeClaim {
	out := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name, Labels: maps.Clone(o.it.Labels), Annotations: map[string]string{}}}
	out.Labels[corev1.LabelTopologyZone] = o.zone
	out.Labels[karpv1.LabelCapacityType] = capacityType
	for _, s := range class.Status.Subnets {
		if s.Zone == o.zone && s.ZoneID != "" {
			out.Labels[labelZoneID] = s.ZoneID
			break
		}
	}
	if hash, err := Hash(class); err == nil {
		out.Annotations[awsv1.AnnotationNodeClassHash] = hash
		out.Annotations[awsv1.AnnotationNodeClassHashVersion] = HashVersion
	}
	out.Status.ProviderID = ProviderID(o.zone, id)
	out.Status.ImageID = image
	out.Status.Capacity = o.it.Capacity.DeepCopy()
	out.Status.Allocatable = o.it.Allocatable.DeepCopy()
	return out
}

// capacityErrors are the fleet error codes that mean "no capacity for this
// offering right now".
var capacityErrors = []string{"InsufficientInstanceCapacity", "MaxSpotInstanceCountExceeded", "VcpuLimitExceeded",
	"UnfulfillableCapacity", "Unsupported", "InsufficientFreeAddressesInSubnet", "SpotMaxPriceTooLow"}

// fleetError turns a fleet that launched nothing into an error: the
// offerings it refused for capacity as InsufficientCapacity (so they are
// avoided for a while), anything else as is.
func (p *Provider) fleetError(nc *karpv1.NodeClaim, capacityType string, errs []ec2types.CreateFleetError) error {
	var refused []cloudprovider.Offering
	var other []string
	for _, e := range errs {
		code := aws.ToString(e.ErrorCode)
		if slices.Contains(capacityErrors, code) && e.LaunchTemplateAndOverrides != nil && e.LaunchTemplateAndOverrides.Overrides != nil {
			ov := e.LaunchTemplateAndOverrides.Overrides
			refused = append(refused, cloudprovider.Offering{InstanceType: string(ov.InstanceType), Zone: aws.ToString(ov.AvailabilityZone), CapacityType: capacityType})
			continue
		}
		if code == "InvalidLaunchTemplateName.NotFoundException" && e.LaunchTemplateAndOverrides != nil && e.LaunchTemplateAndOverrides.LaunchTemplateSpecification != nil {
			p.forgetTemplate(aws.ToString(e.LaunchTemplateAndOverrides.LaunchTemplateSpecification.LaunchTemplateName))
		}
		if !slices.Contains(other, code) {
			other = append(other, code+": "+aws.ToString(e.ErrorMessage))
		}
	}
	if len(other) == 0 {
		return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("launching nodeclaim %s: no %s capacity in %d offerings", nc.Name, capacityType, len(refused)), refused...)
	}
	return fmt.Errorf("launching nodeclaim %s: the fleet launched nothing: %s", nc.Name, strings.Join(other, "; "))
}

func capacityOf(info ec2types.InstanceTypeInfo) corev1.ResourceList {
	return instancetype.Capacity(info, instancetype.DefaultSettings)
}

func resourceQuantity(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }

func int32Of(v *int64) *int32 {
	if v == nil {
		return nil
	}
	return aws.Int32(int32(*v))
}
