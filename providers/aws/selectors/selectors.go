// Package selectors resolves an EC2NodeClass's selector terms into the AWS
// resources they name: subnets, security groups and AMIs (aliases through
// their SSM parameters). Terms are ORed and the fields of a term ANDed; a
// tag value of "*" matches any value. It talks to EC2 and SSM through the
// small interfaces below, which aws-sdk-go-v2's clients satisfy.
package selectors

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
)

// EC2 is what the resolver asks of EC2.
type EC2 interface {
	DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, opts ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
}

// tagFilters turns a term's tags into EC2 filters: tag:KEY=VALUE, or
// tag-key=KEY for "*".
func tagFilters(tags map[string]string) []ec2types.Filter {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]ec2types.Filter, 0, len(tags))
	for _, k := range keys {
		if tags[k] == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		} else {
			out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
		}
	}
	return out
}

// Subnets resolves subnet selector terms, most free addresses first (the
// order launches try them in).
func Subnets(ctx context.Context, api EC2, terms []awsv1.SubnetSelectorTerm) ([]awsv1.Subnet, error) {
	seen := map[string]bool{}
	type found struct {
		subnet awsv1.Subnet
		free   int32
	}
	var all []found
	for i, term := range terms {
		in := &ec2.DescribeSubnetsInput{Filters: tagFilters(term.Tags)}
		if term.ID != "" {
			in.SubnetIds = []string{term.ID}
		}
		pages := ec2.NewDescribeSubnetsPaginator(api, in)
		for pages.HasMorePages() {
			out, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("subnetSelectorTerms[%d]: describing subnets: %w", i, err)
			}
			for _, sn := range out.Subnets {
				id := aws.ToString(sn.SubnetId)
				if seen[id] {
					continue
				}
				seen[id] = true
				all = append(all, found{awsv1.Subnet{ID: id, Zone: aws.ToString(sn.AvailabilityZone), ZoneID: aws.ToString(sn.AvailabilityZoneId)}, aws.ToInt32(sn.AvailableIpAddressCount)})
			}
		}
	}
	slices.SortStableFunc(all, func(a, b found) int {
		return cmp.Or(cmp.Compare(b.free, a.free), cmp.Compare(a.subnet.ID, b.subnet.ID))
	})
	out := make([]awsv1.Subnet, len(all))
	for i, f := range all {
		out[i] = f.subnet
	}
	return out, nil
}

// SecurityGroups resolves security group selector terms (tags, id, or
// group name), by id.
func SecurityGroups(ctx context.Context, api EC2, terms []awsv1.SecurityGroupSelectorTerm) ([]awsv1.SecurityGroup, error) {
	seen := map[string]bool{}
	var out []awsv1.SecurityGroup
	for i, term := range terms {
		in := &ec2.DescribeSecurityGroupsInput{Filters: tagFilters(term.Tags)}
		if term.ID != "" {
			in.GroupIds = []string{term.ID}
		}
		if term.Name != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("group-name"), Values: []string{term.Name}})
		}
		pages := ec2.NewDescribeSecurityGroupsPaginator(api, in)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("securityGroupSelectorTerms[%d]: describing security groups: %w", i, err)
			}
			for _, sg := range page.SecurityGroups {
				id := aws.ToString(sg.GroupId)
				if !seen[id] {
					seen[id] = true
					out = append(out, awsv1.SecurityGroup{ID: id, Name: aws.ToString(sg.GroupName)})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b awsv1.SecurityGroup) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
