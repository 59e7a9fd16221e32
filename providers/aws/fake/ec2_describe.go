package fake

import (
	"encoding/xml"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/catalog"
)

// ec2Namespace is the XML namespace of EC2's answers.
const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// ec2Actions are the EC2 calls the fake answers. Each runs under the
// server's lock.
var ec2Actions = map[string]func(*Server, query) (any, *Fault){
	"DescribeSubnets":               (*Server).describeSubnets,
	"DescribeSecurityGroups":        (*Server).describeSecurityGroups,
	"DescribeImages":                (*Server).describeImages,
	"DescribeInstanceTypes":         (*Server).describeInstanceTypes,
	"DescribeInstanceTypeOfferings": (*Server).describeInstanceTypeOfferings,
	"DescribeSpotPriceHistory":      (*Server).describeSpotPriceHistory,
	"CreateLaunchTemplate":          (*Server).createLaunchTemplate,
	"DescribeLaunchTemplates":       (*Server).describeLaunchTemplates,
	"DeleteLaunchTemplate":          (*Server).deleteLaunchTemplate,
	"CreateFleet":                   (*Server).createFleet,
	"DescribeInstances":             (*Server).describeInstances,
	"TerminateInstances":            (*Server).terminateInstances,
	"CreateTags":                    (*Server).createTags,
}

type subnetItem struct {
	SubnetID         string  `xml:"subnetId"`
	VPCID            string  `xml:"vpcId"`
	State            string  `xml:"state"`
	AvailabilityZone string  `xml:"availabilityZone"`
	ZoneID           string  `xml:"availabilityZoneId"`
	CIDR             string  `xml:"cidrBlock"`
	AvailableIPs     int     `xml:"availableIpAddressCount"`
	Tags             *tagSet `xml:"tagSet"`
}

type describeSubnetsResponse struct {
	XMLName   xml.Name     `xml:"DescribeSubnetsResponse"`
	NS        string       `xml:"xmlns,attr"`
	RequestID string       `xml:"requestId"`
	Subnets   []subnetItem `xml:"subnetSet>item"`
	NextToken string       `xml:"nextToken,omitempty"`
}

func (s *Server) describeSubnets(q query) (any, *Fault) {
	ids := q.list("SubnetId")
	filters := q.filters()
	out := describeSubnetsResponse{NS: ec2Namespace, RequestID: "fake"}
	for _, sn := range s.world.Subnets {
		field := fieldsOf(sn.Tags, map[string]string{"subnet-id": sn.ID, "vpc-id": s.world.VPCID, "availability-zone": sn.Zone,
			"availability-zone-id": sn.ZoneID, "state": "available"})
		if (len(ids) == 0 || slices.Contains(ids, sn.ID)) && matches(field, filters) {
			out.Subnets = append(out.Subnets, subnetItem{SubnetID: sn.ID, VPCID: s.world.VPCID, State: "available", AvailabilityZone: sn.Zone,
				ZoneID: sn.ZoneID, CIDR: sn.CIDR, AvailableIPs: sn.AvailableIPs, Tags: tagsOf(sn.Tags)})
		}
	}
	return out, nil
}

type securityGroupItem struct {
	GroupID     string  `xml:"groupId"`
	GroupName   string  `xml:"groupName"`
	Description string  `xml:"groupDescription"`
	VPCID       string  `xml:"vpcId"`
	Tags        *tagSet `xml:"tagSet"`
}

type describeSecurityGroupsResponse struct {
	XMLName   xml.Name            `xml:"DescribeSecurityGroupsResponse"`
	NS        string              `xml:"xmlns,attr"`
	RequestID string              `xml:"requestId"`
	Groups    []securityGroupItem `xml:"securityGroupInfo>item"`
	NextToken string              `xml:"nextToken,omitempty"`
}

func (s *Server) describeSecurityGroups(q query) (any, *Fault) {
	ids, names := q.list("GroupId"), q.list("GroupName")
	filters := q.filters()
	out := describeSecurityGroupsResponse{NS: ec2Namespace, RequestID: "fake"}
	for _, sg := range s.world.SecurityGroups {
		field := fieldsOf(sg.Tags, map[string]string{"group-id": sg.ID, "group-name": sg.Name, "vpc-id": s.world.VPCID})
		if (len(ids) == 0 || slices.Contains(ids, sg.ID)) && (len(names) == 0 || slices.Contains(names, sg.Name)) && matches(field, filters) {
			out.Groups = append(out.Groups, securityGroupItem{GroupID: sg.ID, GroupName: sg.Name, Description: sg.Description, VPCID: s.world.VPCID, Tags: tagsOf(sg.Tags)})
		}
	}
	return out, nil
}

type imageItem struct {
	ImageID         string  `xml:"imageId"`
	Name            string  `xml:"name"`
	Owner           string  `xml:"imageOwnerId"`
	Architecture    string  `xml:"architecture"`
	CreationDate    string  `xml:"creationDate"`
	DeprecationTime string  `xml:"deprecationTime,omitempty"`
	State           string  `xml:"imageState"`
	Tags            *tagSet `xml:"tagSet"`
}

type describeImagesResponse struct {
	XMLName   xml.Name    `xml:"DescribeImagesResponse"`
	NS        string      `xml:"xmlns,attr"`
	RequestID string      `xml:"requestId"`
	Images    []imageItem `xml:"imagesSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

func (s *Server) describeImages(q query) (any, *Fault) {
	ids, owners := q.list("ImageId"), q.list("Owner")
	filters := q.filters()
	out := describeImagesResponse{NS: ec2Namespace, RequestID: "fake"}
	for _, im := range s.world.Images {
		field := fieldsOf(im.Tags, map[string]string{"image-id": im.ID, "name": im.Name, "owner-id": im.Owner,
			"architecture": im.Architecture, "state": "available"})
		owned := len(owners) == 0 || slices.Contains(owners, im.Owner) ||
			slices.Contains(owners, "amazon") && (im.Owner == OwnerAmazon || im.Owner == OwnerBottlerocket)
		if (len(ids) == 0 || slices.Contains(ids, im.ID)) && owned && matches(field, filters) {
			out.Images = append(out.Images, imageItem{ImageID: im.ID, Name: im.Name, Owner: im.Owner, Architecture: im.Architecture,
				CreationDate: im.CreationDate, DeprecationTime: im.DeprecationTime, State: "available", Tags: tagsOf(im.Tags)})
		}
	}
	return out, nil
}

type instanceTypeItem struct {
	InstanceType      string          `xml:"instanceType"`
	CurrentGeneration bool            `xml:"currentGeneration"`
	BareMetal         bool            `xml:"bareMetal"`
	Hypervisor        string          `xml:"hypervisor,omitempty"`
	UsageClasses      []string        `xml:"supportedUsageClasses>item"`
	Architectures     []string        `xml:"processorInfo>supportedArchitectures>item"`
	Manufacturer      string          `xml:"processorInfo>manufacturer,omitempty"`
	SustainedGHz      string          `xml:"processorInfo>sustainedClockSpeedInGhz,omitempty"`
	VCPUs             int64           `xml:"vCpuInfo>defaultVCpus"`
	MemoryMiB         int64           `xml:"memoryInfo>sizeInMiB"`
	GPUs              []gpuItem       `xml:"gpuInfo>gpus>item,omitempty"`
	Neuron            []neuronItem    `xml:"neuronInfo>neuronDevices>item,omitempty"`
	Network           networkInfoItem `xml:"networkInfo"`
	EBSBandwidthMbps  string          `xml:"ebsInfo>ebsOptimizedInfo>maximumBandwidthInMbps,omitempty"`
	Storage           *storageItem    `xml:"instanceStorageInfo,omitempty"`
}

type neuronItem struct {
	Count int64  `xml:"count"`
	Name  string `xml:"name"`
}

type storageItem struct {
	TotalGB string `xml:"totalSizeInGB"`
	NVMe    string `xml:"nvmeSupport"`
}

type gpuItem struct {
	Count        int64  `xml:"count"`
	Name         string `xml:"name"`
	Manufacturer string `xml:"manufacturer"`
	MemoryMiB    int64  `xml:"memoryInfo>sizeInMiB"`
}

type networkInfoItem struct {
	MaxInterfaces   int    `xml:"maximumNetworkInterfaces"`
	IPv4PerInteface int    `xml:"ipv4AddressesPerInterface"`
	Performance     string `xml:"networkPerformance,omitempty"`
	// BaselineGbps is the first network card's baseline bandwidth.
	BaselineGbps string `xml:"networkCards>item>baselineBandwidthInGbps,omitempty"`
	Encryption   bool   `xml:"encryptionInTransitSupported"`
}

type describeInstanceTypesResponse struct {
	XMLName   xml.Name           `xml:"DescribeInstanceTypesResponse"`
	NS        string             `xml:"xmlns,attr"`
	RequestID string             `xml:"requestId"`
	Types     []instanceTypeItem `xml:"instanceTypeSet>item"`
	NextToken string             `xml:"nextToken,omitempty"`
}

// describeInstanceTypes pages through the catalog, 100 types at a time
// (EC2's most).
func (s *Server) describeInstanceTypes(q query) (any, *Fault) {
	names := q.list("InstanceType")
	var picked []*catalog.InstanceType
	for i := range s.catalog {
		if len(names) == 0 || slices.Contains(names, s.catalog[i].Name) {
			picked = append(picked, &s.catalog[i])
		}
	}
	from, to, next, fault := page(q, len(picked), 100)
	if fault != nil {
		return nil, fault
	}
	out := describeInstanceTypesResponse{NS: ec2Namespace, RequestID: "fake", NextToken: next}
	for _, it := range picked[from:to] {
		out.Types = append(out.Types, instanceTypeInfo(it))
	}
	return out, nil
}

// instanceTypeInfo describes a catalog type as EC2 does.
func instanceTypeInfo(it *catalog.InstanceType) instanceTypeItem {
	arch := "x86_64"
	if it.Labels[corev1.LabelArchStable] == "arm64" {
		arch = "arm64"
	}
	item := instanceTypeItem{InstanceType: it.Name, CurrentGeneration: true, Architectures: []string{arch},
		Hypervisor: it.Labels[awsv1.LabelInstanceHypervisor], Manufacturer: it.Labels[awsv1.LabelInstanceCPUManufacturer],
		BareMetal: strings.Contains(it.Labels[awsv1.LabelInstanceSize], "metal"), UsageClasses: []string{"on-demand"}}
	if slices.ContainsFunc(it.Offerings, func(o catalog.Offering) bool { return o.CapacityType == karpv1.CapacityTypeSpot }) {
		item.UsageClasses = append(item.UsageClasses, "spot")
	}
	item.VCPUs = it.Capacity.Cpu().Value()
	item.MemoryMiB = it.Capacity.Memory().Value() >> 20
	// Fractional GPUs (g6f) are described with a count of 0.
	if n, err := strconv.ParseInt(it.Labels[awsv1.LabelInstanceGPUCount], 10, 64); err == nil && it.Labels[awsv1.LabelInstanceGPUName] != "" {
		mem, _ := strconv.ParseInt(it.Labels[awsv1.LabelInstanceGPUMemory], 10, 64)
		item.GPUs = []gpuItem{{Count: n, Name: it.Labels[awsv1.LabelInstanceGPUName], Manufacturer: it.Labels[awsv1.LabelInstanceGPUManufacturer], MemoryMiB: mem}}
	}
	item.Network.MaxInterfaces, item.Network.IPv4PerInteface = eniLimits(it.Capacity.Pods().Value())
	// The catalog's labels, as the fields Karpenter reads them from.
	l := it.Labels
	item.Network.Encryption = l[awsv1.LabelInstanceEncryptionInTransit] == "true"
	if mbps, err := strconv.ParseFloat(l[awsv1.LabelInstanceNetworkBandwidth], 64); err == nil {
		item.Network.BaselineGbps = strconv.FormatFloat(mbps/1000, 'f', -1, 64)
	}
	if mhz, err := strconv.ParseFloat(l[awsv1.LabelInstanceCPUSustainedClockSpeed], 64); err == nil {
		item.SustainedGHz = strconv.FormatFloat(mhz/1000, 'f', -1, 64)
	}
	item.EBSBandwidthMbps = l[awsv1.LabelInstanceEBSBandwidth]
	if gb := l[awsv1.LabelInstanceLocalNVME]; gb != "" && gb != "0" {
		item.Storage = &storageItem{TotalGB: gb, NVMe: "required"}
	}
	if n, err := strconv.ParseInt(l[awsv1.LabelInstanceAcceleratorCount], 10, 64); err == nil && n > 0 && l[awsv1.LabelInstanceAcceleratorManufacturer] == "aws" {
		item.Neuron = []neuronItem{{Count: n, Name: l[awsv1.LabelInstanceAcceleratorName]}}
	}
	return item
}

// eniLimits finds network interfaces and IPv4 addresses per interface
// whose ENI-limited pod count (interfaces × (addresses − 1) + 2) is the
// catalog's max pods: the fewest interfaces that make it exact, as EC2's
// shapes run (2 × 4 → 8 pods, 3 × 10 → 29, 4 × 15 → 58, 8 × 30 → 234).
func eniLimits(pods int64) (interfaces, perInterface int) {
	for enis := 2; enis <= 16; enis++ {
		for ips := 2; ips <= 50; ips++ {
			if int64(enis*(ips-1)+2) == pods {
				return enis, ips
			}
		}
	}
	// Not a pod count ENIs give (a custom max): one interface that holds it.
	return 1, int(max(pods-1, 2))
}

type offeringItem struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

type describeInstanceTypeOfferingsResponse struct {
	XMLName   xml.Name       `xml:"DescribeInstanceTypeOfferingsResponse"`
	NS        string         `xml:"xmlns,attr"`
	RequestID string         `xml:"requestId"`
	Offerings []offeringItem `xml:"instanceTypeOfferingSet>item"`
	NextToken string         `xml:"nextToken,omitempty"`
}

// describeInstanceTypeOfferings lists, per availability zone, the types the
// catalog offers there (any capacity type), 1,000 at a time.
func (s *Server) describeInstanceTypeOfferings(q query) (any, *Fault) {
	locationType := q.get("LocationType")
	if locationType == "" {
		locationType = "region"
	}
	filters := q.filters()
	var all []offeringItem
	for _, it := range s.catalog {
		var zones []string
		for _, o := range it.Offerings {
			if !slices.Contains(zones, o.Zone) {
				zones = append(zones, o.Zone)
			}
		}
		slices.Sort(zones)
		if locationType == "region" {
			zones = []string{s.region}
		}
		for _, z := range zones {
			field := fieldsOf(nil, map[string]string{"location": z, "instance-type": it.Name})
			if matches(field, filters) {
				all = append(all, offeringItem{InstanceType: it.Name, LocationType: locationType, Location: z})
			}
		}
	}
	from, to, next, fault := page(q, len(all), 1000)
	if fault != nil {
		return nil, fault
	}
	return describeInstanceTypeOfferingsResponse{NS: ec2Namespace, RequestID: "fake", Offerings: all[from:to], NextToken: next}, nil
}
