package fake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
)

// getProducts answers the Pricing API's GetProducts for AmazonEC2 with
// one Linux, shared-tenancy, on-demand product per catalog type (its
// lowest on-demand price), 100 at a time. Filters other than regionCode
// and instanceType are accepted and not checked.
func (s *Server) getProducts(body []byte) (any, *Fault) {
	var in struct {
		ServiceCode string
		Filters     []struct{ Type, Field, Value string }
		NextToken   string
		MaxResults  int
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "InvalidParameterException", Message: err.Error()}
	}
	if in.ServiceCode != "AmazonEC2" {
		return nil, &Fault{Status: http.StatusBadRequest, Code: "InvalidParameterException", Message: fmt.Sprintf("the fake prices AmazonEC2 only, not %q", in.ServiceCode)}
	}
	region, only := s.region, ""
	for _, f := range in.Filters {
		switch f.Field {
		case "regionCode":
			region = f.Value
		case "instanceType":
			only = f.Value
		}
	}
	var all []string
	if region == s.region {
		for _, it := range s.catalog {
			if only != "" && it.Name != only {
				continue
			}
			price := -1.0
			for _, o := range it.Offerings {
				if o.CapacityType == karpv1.CapacityTypeOnDemand && (price < 0 || o.Price < price) {
					price = o.Price
				}
			}
			if price < 0 {
				continue
			}
			all = append(all, priceListItem(it.Name, region, price))
		}
	}
	slices.Sort(all)
	from := 0
	if in.NextToken != "" {
		v, err := strconv.Atoi(in.NextToken)
		if err != nil || v < 0 || v > len(all) {
			return nil, &Fault{Status: http.StatusBadRequest, Code: "InvalidNextTokenException", Message: "bad NextToken"}
		}
		from = v
	}
	size := 100
	if in.MaxResults > 0 {
		size = min(in.MaxResults, 100)
	}
	to := min(from+size, len(all))
	out := map[string]any{"FormatVersion": "aws_v1", "PriceList": all[from:to]}
	if to < len(all) {
		out["NextToken"] = strconv.Itoa(to)
	}
	return out, nil
}

// priceListItem is one product of the price list, as the JSON text the
// API returns for each.
func priceListItem(instanceType, region string, price float64) string {
	sku := fmt.Sprintf("FAKE%s", instanceType)
	doc := map[string]any{
		"product": map[string]any{"productFamily": "Compute Instance", "sku": sku, "attributes": map[string]string{
			"instanceType": instanceType, "regionCode": region, "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}},
		"terms": map[string]any{"OnDemand": map[string]any{sku + ".JRTCKXETXF": map[string]any{"priceDimensions": map[string]any{
			sku + ".JRTCKXETXF.6YS6EN2CT7": map[string]any{"unit": "Hrs", "pricePerUnit": map[string]string{"USD": strconv.FormatFloat(price, 'f', 10, 64)}}}}}},
	}
	raw, _ := json.Marshal(doc) // maps of strings: cannot fail
	return string(raw)
}
