package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/sched/requirement"
	"github.com/nodewright/nodewright/pkg/catalog"
	"github.com/nodewright/nodewright/providers/aws/instancetype"
)

// inventory is what EC2 sells in the region, as last read: the types,
// the zones each is offered in, and spot prices per type and zone.
type inventory struct {
	read  time.Time
	infos []ec2types.InstanceTypeInfo
	// index finds a type's description in infos.
	index map[ec2types.InstanceType]int
	zones map[string][]string
	spot  map[string]map[string]float64
	// onDemand are on-demand prices: the Pricing API's over the table.
	onDemand map[string]float64
}

// inventoryCache reads the inventory at most once per refresh interval.
type inventoryCache struct {
	mu  sync.Mutex
	inv *inventory
	// built are instance types per NodeClass, for the inventory and the
	// NodeClass version they were built from.
	built map[string]builtTypes
}

type builtTypes struct {
	read    time.Time
	version string
	types   []*catalog.InstanceType
}

// inventory returns the current inventory, reading it when it is older
// than the refresh interval.
func (p *Provider) inventory(ctx context.Context) (*inventory, error) {
	p.cache.mu.Lock()
	defer p.cache.mu.Unlock()
	now := p.clock.Now()
	if inv := p.cache.inv; inv != nil && now.Sub(inv.read) < p.opts.RefreshInterval {
		return inv, nil
	}
	inv := &inventory{read: now, index: map[ec2types.InstanceType]int{}, zones: map[string][]string{}, spot: map[string]map[string]float64{}, onDemand: maps.Clone(p.onDemand)}
	if p.opts.Pricing != nil {
		prices, err := onDemandPrices(ctx, p.opts.Pricing, p.opts.Region)
		if err != nil {
			p.opts.Log.Error(err, "reading on-demand prices from the Pricing API; using the embedded table")
		}
		for name, price := range prices {
			inv.onDemand[name] = price
		}
	}
	types := ec2.NewDescribeInstanceTypesPaginator(p.ec2, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(p.opts.PageSize)})
	for types.HasMorePages() {
		page, err := types.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instance types: %w", err)
		}
		for _, info := range page.InstanceTypes {
			if supported(info) {
				inv.index[info.InstanceType] = len(inv.infos)
				inv.infos = append(inv.infos, info)
			}
		}
	}
	offerings := ec2.NewDescribeInstanceTypeOfferingsPaginator(p.ec2, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone})
	for offerings.HasMorePages() {
		page, err := offerings.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instance type offerings: %w", err)
		}
		for _, o := range page.InstanceTypeOfferings {
			name := string(o.InstanceType)
			inv.zones[name] = append(inv.zones[name], aws.ToString(o.Location))
		}
	}
	prices := ec2.NewDescribeSpotPriceHistoryPaginator(p.ec2, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX"}, StartTime: aws.Time(now)})
	for prices.HasMorePages() {
		page, err := prices.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing spot prices: %w", err)
		}
		for _, sp := range page.SpotPriceHistory {
			price, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
			if err != nil {
				continue
			}
			name, zone := string(sp.InstanceType), aws.ToString(sp.AvailabilityZone)
			if inv.spot[name] == nil {
				inv.spot[name] = map[string]float64{}
			}
			// The newest point wins; the history comes newest first.
			if _, seen := inv.spot[name][zone]; !seen {
				inv.spot[name][zone] = price
			}
		}
	}
	p.cache.inv = inv
	return inv, nil
}

// supported: types Nodewright launches are amd64 or arm64 and sold
// on-demand.
func supported(info ec2types.InstanceTypeInfo) bool {
	if info.ProcessorInfo == nil || !slices.ContainsFunc(info.ProcessorInfo.SupportedArchitectures, func(a ec2types.ArchitectureType) bool {
		return a == ec2types.ArchitectureTypeX8664 || a == ec2types.ArchitectureTypeArm64
	}) {
		return false
	}
	return slices.Contains(info.SupportedUsageClasses, ec2types.UsageClassTypeOnDemand)
}

// instanceTypes are the types a NodeClass can launch: those an image of
// its status boots, offered in the zones of its subnets, with its kubelet
// settings' pod count.
func (p *Provider) instanceTypes(ctx context.Context, nc *awsv1.EC2NodeClass) ([]*catalog.InstanceType, error) {
	inv, err := p.inventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("instance types of ec2nodeclass %s: %w", nc.Name, err)
	}
	p.cache.mu.Lock()
	defer p.cache.mu.Unlock()
	version := string(nc.UID) + "/" + nc.ResourceVersion
	if b, ok := p.cache.built[nc.Name]; ok && b.read.Equal(inv.read) && b.version == version {
		return b.types, nil
	}
	var images []requirement.Requirements
	for _, ami := range nc.Status.AMIs {
		reqs, err := requirement.FromNodeSelector(ami.Requirements)
		if err != nil {
			return nil, fmt.Errorf("ec2nodeclass %s: status.amis %s: %w", nc.Name, ami.ID, err)
		}
		images = append(images, reqs)
	}
	var subnetZones []string
	for _, s := range nc.Status.Subnets {
		if !slices.Contains(subnetZones, s.Zone) {
			subnetZones = append(subnetZones, s.Zone)
		}
	}
	settings := instancetype.DefaultSettings
	if nc.Spec.Kubelet != nil {
		settings.MaxPods = nc.Spec.Kubelet.MaxPods
	}
	var out []*catalog.InstanceType
	for _, info := range inv.infos {
		labels := instancetype.Labels(info)
		labels[corev1.LabelOSStable] = string(corev1.Linux)
		if !slices.ContainsFunc(images, func(r requirement.Requirements) bool { return r.Matches(labels) == nil }) {
			continue
		}
		name := string(info.InstanceType)
		capacity := instancetype.Capacity(info, settings)
		if settings.MaxPods == nil && nc.Spec.Kubelet != nil && nc.Spec.Kubelet.PodsPerCore != nil {
			perCore := int64(*nc.Spec.Kubelet.PodsPerCore) * capacity.Cpu().Value()
			if pods := capacity.Pods().Value(); perCore > 0 && perCore < pods {
				capacity[corev1.ResourcePods] = *resourceQuantity(perCore)
			}
		}
		it := &catalog.InstanceType{Name: name, Labels: labels, OperatingSystems: []string{string(corev1.Linux)},
			Capacity: capacity, Allocatable: instancetype.Allocatable(info, capacity)}
		for _, zone := range inv.zones[name] {
			if !slices.Contains(subnetZones, zone) {
				continue
			}
			if price, ok := inv.onDemand[name]; ok {
				it.Offerings = append(it.Offerings, catalog.Offering{Zone: zone, CapacityType: karpv1.CapacityTypeOnDemand, Price: price, Available: true})
			}
			if price, ok := inv.spot[name][zone]; ok && slices.Contains(info.SupportedUsageClasses, ec2types.UsageClassTypeSpot) {
				it.Offerings = append(it.Offerings, catalog.Offering{Zone: zone, CapacityType: karpv1.CapacityTypeSpot, Price: price, Available: true})
			}
		}
		if len(it.Offerings) > 0 {
			out = append(out, it)
		}
	}
	p.cache.built[nc.Name] = builtTypes{read: inv.read, version: version, types: out}
	return out, nil
}

// onDemandPrices reads the region's Linux, shared-tenancy on-demand
// prices per instance type from the Pricing API. What it read before an
// error is returned with it.
func onDemandPrices(ctx context.Context, api Pricing, region string) (map[string]float64, error) {
	out := map[string]float64{}
	match := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
	}
	pages := pricing.NewGetProductsPaginator(api, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), FormatVersion: aws.String("aws_v1"),
		Filters: []pricingtypes.Filter{match("regionCode", region), match("operatingSystem", "Linux"), match("tenancy", "Shared"),
			match("preInstalledSw", "NA"), match("capacitystatus", "Used")}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return out, fmt.Errorf("reading on-demand prices: %w", err)
		}
		for _, item := range page.PriceList {
			name, price, ok := parsePriceListItem(item)
			if ok {
				out[name] = price
			}
		}
	}
	return out, nil
}

// parsePriceListItem reads an instance type and its hourly USD price from
// one price-list document.
func parsePriceListItem(item string) (string, float64, bool) {
	var doc struct {
		Product struct {
			Attributes struct {
				InstanceType string `json:"instanceType"`
			} `json:"attributes"`
		} `json:"product"`
		Terms struct {
			OnDemand map[string]struct {
				PriceDimensions map[string]struct {
					PricePerUnit map[string]string `json:"pricePerUnit"`
				} `json:"priceDimensions"`
			} `json:"OnDemand"`
		} `json:"terms"`
	}
	if json.Unmarshal([]byte(item), &doc) != nil || doc.Product.Attributes.InstanceType == "" {
		return "", 0, false
	}
	for _, term := range doc.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			if price, err := strconv.ParseFloat(dim.PricePerUnit["USD"], 64); err == nil && price > 0 {
				return doc.Product.Attributes.InstanceType, price, true
			}
		}
	}
	return "", 0, false
}
