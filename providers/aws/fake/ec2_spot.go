package fake

import (
	"encoding/xml"
	"fmt"
	"slices"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

type spotPriceItem struct {
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
	AvailabilityZone   string `xml:"availabilityZone"`
}

type describeSpotPriceHistoryResponse struct {
	XMLName   xml.Name        `xml:"DescribeSpotPriceHistoryResponse"`
	NS        string          `xml:"xmlns,attr"`
	RequestID string          `xml:"requestId"`
	Prices    []spotPriceItem `xml:"spotPriceHistorySet>item"`
	NextToken string          `xml:"nextToken,omitempty"`
}

// describeSpotPriceHistory answers with the catalog's spot price of each
// type and zone (one point each, Linux/UNIX), 1,000 at a time.
func (s *Server) describeSpotPriceHistory(q query) (any, *Fault) {
	types, products := q.list("InstanceType"), q.list("ProductDescription")
	if len(products) > 0 && !slices.Contains(products, "Linux/UNIX") {
		return describeSpotPriceHistoryResponse{NS: ec2Namespace, RequestID: "fake"}, nil
	}
	filters := q.filters()
	var all []spotPriceItem
	for _, it := range s.catalog {
		if len(types) > 0 && !slices.Contains(types, it.Name) {
			continue
		}
		for _, o := range it.Offerings {
			if o.CapacityType != karpv1.CapacityTypeSpot {
				continue
			}
			field := fieldsOf(nil, map[string]string{"availability-zone": o.Zone, "instance-type": it.Name, "product-description": "Linux/UNIX"})
			if matches(field, filters) {
				all = append(all, spotPriceItem{InstanceType: it.Name, ProductDescription: "Linux/UNIX", SpotPrice: fmt.Sprintf("%.6f", o.Price),
					Timestamp: "2026-11-30T00:00:00.000Z", AvailabilityZone: o.Zone})
			}
		}
	}
	from, to, next, fault := page(q, len(all), 1000)
	if fault != nil {
		return nil, fault
	}
	return describeSpotPriceHistoryResponse{NS: ec2Namespace, RequestID: "fake", Prices: all[from:to], NextToken: next}, nil
}
