package aws

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/mitchellh/hashstructure/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
	"github.com/nodewright/nodewright/providers/aws/instancetype"
	"github.com/nodewright/nodewright/providers/aws/userdata"
)

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
// (price-capacity-optimized), else on-demand (lowest-price).
func (p *Provider) Create(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	class, err := p.nodeClass(ctx, nc.Spec.NodeClassRef)
	if err != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
	}
	types, err := p.instanceTypes(ctx, class)
	if err != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
	}
	reqs, err := requirement.FromAPI(nc.Spec.Requirements)
	if err != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: spec.requirements: %w", nc.Name, err)
	}
	capacityType, options := chooseOptions(types, reqs, nc.Spec.Resources.Requests)
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
	out, err := p.ec2.CreateFleet(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: creating fleet: %w", nc.Name, err)
	}
	for _, launched := range out.Instances {
		if len(launched.InstanceIds) == 0 {
			continue
		}
		zone := ""
		if launched.LaunchTemplateAndOverrides != nil && launched.LaunchTemplateAndOverrides.Overrides != nil {
			zone = aws.ToString(launched.LaunchTemplateAndOverrides.Overrides.AvailabilityZone)
		}
		i := slices.IndexFunc(options, func(o launchOption) bool {
			return o.it.Name == string(launched.InstanceType) && (zone == "" || o.zone == zone)
		})
		if i < 0 {
			return nil, fmt.Errorf("launching nodeclaim %s: EC2 launched %s in %q, which was not asked for", nc.Name, launched.InstanceType, zone)
		}
		return p.launched(class, nc, options[i], capacityType, launched.InstanceIds[0], imageFor(byImage, options[i])), nil
	}
	return nil, p.fleetError(nc, capacityType, out.Errors)
}

// chooseOptions picks the capacity type (spot when allowed and offered)
// and the launch options of the cheapest MaxInstanceTypes types that meet
// the requirements and hold the requests.
func chooseOptions(types []*catalog.InstanceType, reqs requirement.Requirements, requests corev1.ResourceList) (string, []launchOption) {
	zones, zoneSet := reqs.Get(corev1.LabelTopologyZone)
	capacityTypes, ctSet := reqs.Get(karpv1.LabelCapacityType)
	allows := func(r requirement.Requirement, set bool, v string) bool { return !set || r.Has(v) }
	byType := map[string][]launchOption{}
	var all []launchOption
	for _, it := range types {
		if !fits(requests, it.Allocatable) || reqs.Intersects(requirement.FromLabels(it.Labels)) != nil {
			continue
		}
		for _, o := range it.Offerings {
			if o.Available && allows(zones, zoneSet, o.Zone) && allows(capacityTypes, ctSet, o.CapacityType) {
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

// fits: every request within allocatable (an absent resource is zero).
func fits(requests, allocatable corev1.ResourceList) bool {
	for name, q := range requests {
		if q.Cmp(allocatable[name]) > 0 {
			return false
		}
	}
	return true
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
			out.Labels["topology.k8s.aws/zone-id"] = s.ZoneID
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

// HashVersion versions Hash.
const HashVersion = "v1"

// Hash fingerprints an EC2NodeClass's spec for drift: selector terms
// and the kubelet settings do not count (drift from them is read off the
// resolved status and the instance types), list order does not, and an
// empty value counts as absent.
func Hash(class *awsv1.EC2NodeClass) (string, error) {
	h, err := hashstructure.Hash(class.Spec, hashstructure.FormatV2, &hashstructure.HashOptions{SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true})
	if err != nil {
		return "", fmt.Errorf("hashing ec2nodeclass %s: %w", class.Name, err)
	}
	return strconv.FormatUint(h, 10), nil
}

// launchTemplateData is what a launch template holds; its hash names it.
type launchTemplateData struct {
	Cluster, NodeClass, Image, InstanceProfile, UserData string
	SecurityGroups                                       []string
	Metadata                                             *awsv1.MetadataOptions
	BlockDevices                                         []*awsv1.BlockDeviceMapping
	PublicIP, Monitoring                                 *bool
}

// ensureLaunchTemplate makes (once) the launch template of a NodeClass,
// image and NodeClaim shape, and returns its name.
func (p *Provider) ensureLaunchTemplate(ctx context.Context, class *awsv1.EC2NodeClass, nc *karpv1.NodeClaim, image string) (string, error) {
	ud, err := p.userData(class, nc)
	if err != nil {
		return "", err
	}
	data := launchTemplateData{Cluster: p.opts.ClusterName, NodeClass: class.Name, Image: image, InstanceProfile: class.Status.InstanceProfile,
		UserData: ud, Metadata: class.Spec.MetadataOptions, BlockDevices: class.Spec.BlockDeviceMappings,
		PublicIP: class.Spec.AssociatePublicIPAddress, Monitoring: class.Spec.DetailedMonitoring}
	for _, sg := range class.Status.SecurityGroups {
		data.SecurityGroups = append(data.SecurityGroups, sg.ID)
	}
	h, err := hashstructure.Hash(data, hashstructure.FormatV2, nil)
	if err != nil {
		return "", fmt.Errorf("hashing the launch template of ec2nodeclass %s: %w", class.Name, err)
	}
	name := fmt.Sprintf("%s/%d", awsv1.Group, h)
	p.templatesMu.Lock()
	_, known := p.templates[name]
	if known {
		p.templates[name] = p.clock.Now()
	}
	p.templatesMu.Unlock()
	if known {
		return name, nil
	}
	ltTags := []ec2types.Tag{{Key: aws.String(TagCluster), Value: aws.String(p.opts.ClusterName)}, {Key: aws.String(TagNodeClass), Value: aws.String(class.Name)},
		{Key: aws.String(fmt.Sprintf(tagClusterFmt, p.opts.ClusterName)), Value: aws.String("owned")}}
	req := &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image), UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(ud))),
		SecurityGroupIds: data.SecurityGroups, MetadataOptions: metadataOptions(class.Spec.MetadataOptions),
		BlockDeviceMappings: blockDevices(class), TagSpecifications: nil}
	if class.Status.InstanceProfile != "" {
		req.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(class.Status.InstanceProfile)}
	}
	if class.Spec.DetailedMonitoring != nil {
		req.Monitoring = &ec2types.LaunchTemplatesMonitoringRequest{Enabled: class.Spec.DetailedMonitoring}
	}
	if class.Spec.AssociatePublicIPAddress != nil {
		req.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{
			DeviceIndex: aws.Int32(0), AssociatePublicIpAddress: class.Spec.AssociatePublicIPAddress, Groups: data.SecurityGroups}}
		req.SecurityGroupIds = nil
	}
	_, err = p.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: req,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: ltTags}}})
	if err != nil && !IsErrorCode(err, "InvalidLaunchTemplateName.AlreadyExistsException") {
		return "", fmt.Errorf("creating launch template %s for ec2nodeclass %s: %w", name, class.Name, err)
	}
	p.templatesMu.Lock()
	p.templates[name] = p.clock.Now()
	p.templatesMu.Unlock()
	return name, nil
}

func (p *Provider) forgetTemplate(name string) {
	p.templatesMu.Lock()
	defer p.templatesMu.Unlock()
	delete(p.templates, name)
}

// metadataOptions are Karpenter's defaults (IMDSv2 required, hop limit 1)
// under the NodeClass's settings.
func metadataOptions(m *awsv1.MetadataOptions) *ec2types.LaunchTemplateInstanceMetadataOptionsRequest {
	out := &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
		HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1),
		HttpProtocolIpv6: ec2types.LaunchTemplateInstanceMetadataProtocolIpv6Disabled}
	if m == nil {
		return out
	}
	if m.HTTPEndpoint != nil {
		out.HttpEndpoint = ec2types.LaunchTemplateInstanceMetadataEndpointState(*m.HTTPEndpoint)
	}
	if m.HTTPTokens != nil {
		out.HttpTokens = ec2types.LaunchTemplateHttpTokensState(*m.HTTPTokens)
	}
	if m.HTTPPutResponseHopLimit != nil {
		out.HttpPutResponseHopLimit = aws.Int32(int32(*m.HTTPPutResponseHopLimit))
	}
	if m.HTTPProtocolIPv6 != nil {
		out.HttpProtocolIpv6 = ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(*m.HTTPProtocolIPv6)
	}
	return out
}

// blockDevices are the NodeClass's mappings, or the family's default root
// volume (20Gi gp3, encrypted).
func blockDevices(class *awsv1.EC2NodeClass) []ec2types.LaunchTemplateBlockDeviceMappingRequest {
	mappings := class.Spec.BlockDeviceMappings
	if len(mappings) == 0 {
		device := "/dev/xvda"
		if family(class) == familyBottlerocket {
			return []ec2types.LaunchTemplateBlockDeviceMappingRequest{
				{DeviceName: aws.String("/dev/xvda"), Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(4), VolumeType: ec2types.VolumeTypeGp3, Encrypted: aws.Bool(true)}},
				{DeviceName: aws.String("/dev/xvdb"), Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(20), VolumeType: ec2types.VolumeTypeGp3, Encrypted: aws.Bool(true)}},
			}
		}
		return []ec2types.LaunchTemplateBlockDeviceMappingRequest{{DeviceName: aws.String(device),
			Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(20), VolumeType: ec2types.VolumeTypeGp3, Encrypted: aws.Bool(true)}}}
	}
	var out []ec2types.LaunchTemplateBlockDeviceMappingRequest
	for _, m := range mappings {
		if m == nil {
			continue
		}
		r := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: m.DeviceName}
		if e := m.EBS; e != nil {
			r.Ebs = &ec2types.LaunchTemplateEbsBlockDeviceRequest{Encrypted: e.Encrypted, DeleteOnTermination: e.DeleteOnTermination,
				Iops: int32Of(e.IOPS), Throughput: int32Of(e.Throughput), KmsKeyId: e.KMSKeyID, SnapshotId: e.SnapshotID}
			if e.VolumeType != nil {
				r.Ebs.VolumeType = ec2types.VolumeType(*e.VolumeType)
			}
			if e.VolumeSize != nil {
				r.Ebs.VolumeSize = aws.Int32(int32(e.VolumeSize.ScaledValue(resource.Giga)))
				if gib := e.VolumeSize.Value() >> 30; gib > 0 && e.VolumeSize.Value()%(1<<30) == 0 {
					r.Ebs.VolumeSize = aws.Int32(int32(gib))
				}
			}
		}
		out = append(out, r)
	}
	return out
}

// AMI families the provider writes user data for.
const (
	familyAL2023       = "AL2023"
	familyBottlerocket = "Bottlerocket"
	familyCustom       = "Custom"
)

// family is the NodeClass's AMI family: its alias's, else spec.amiFamily,
// else AL2023.
func family(class *awsv1.EC2NodeClass) string {
	for _, t := range class.Spec.AMISelectorTerms {
		if name, _, ok := strings.Cut(t.Alias, "@"); ok {
			switch strings.ToLower(name) {
			case "bottlerocket":
				return familyBottlerocket
			case "al2023":
				return familyAL2023
			}
		}
	}
	if class.Spec.AMIFamily != nil {
		switch strings.ToLower(*class.Spec.AMIFamily) {
		case "bottlerocket":
			return familyBottlerocket
		case "custom":
			return familyCustom
		}
	}
	return familyAL2023
}

// userData is the node's user data for the NodeClass's family.
func (p *Provider) userData(class *awsv1.EC2NodeClass, nc *karpv1.NodeClaim) (string, error) {
	custom := ""
	if class.Spec.UserData != nil {
		custom = *class.Spec.UserData
	}
	node := userdata.Node{ClusterName: p.opts.ClusterName, Endpoint: p.opts.ClusterEndpoint, CABundle: p.opts.ClusterCABundle,
		ServiceCIDR: p.opts.ClusterCIDR, Labels: nodeLabels(nc), Custom: custom,
		// The node registers tainted until Nodewright has synced it with its
		// NodeClaim.
		Taints:            append(append(slices.Clone(nc.Spec.Taints), nc.Spec.StartupTaints...), karpv1.UnregisteredNoExecuteTaint),
		LocalStorageRAID0: class.Spec.InstanceStorePolicy != nil && *class.Spec.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0}
	if k := class.Spec.Kubelet; k != nil {
		if k.MaxPods != nil {
			node.MaxPods = int64(*k.MaxPods)
		}
		node.ClusterDNS = k.ClusterDNS
	}
	var out string
	var err error
	switch family(class) {
	case familyBottlerocket:
		out, err = userdata.Bottlerocket(node)
	case familyCustom:
		out = custom
	default:
		out, err = userdata.AL2023(node)
	}
	if err != nil {
		return "", fmt.Errorf("ec2nodeclass %s: %w", class.Name, err)
	}
	return out, nil
}

// nodeLabels are the NodeClaim's labels a kubelet may register with (not
// the kubernetes.io and k8s.io ones the node restriction reserves).
func nodeLabels(nc *karpv1.NodeClaim) map[string]string {
	out := map[string]string{}
	for k, v := range nc.Labels {
		domain, _, ok := strings.Cut(k, "/")
		if ok && (strings.HasSuffix(domain, "kubernetes.io") || strings.HasSuffix(domain, "k8s.io")) {
			continue
		}
		out[k] = v
	}
	return out
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
