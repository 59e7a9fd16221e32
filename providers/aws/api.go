package aws

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/pricing"

	"github.com/nodewright/nodewright/providers/aws/selectors"
)

// EC2 is what the provider asks of EC2; *ec2.Client satisfies it.
type EC2 interface {
	selectors.EC2
	ec2.DescribeInstanceTypesAPIClient
	ec2.DescribeInstanceTypeOfferingsAPIClient
	ec2.DescribeSpotPriceHistoryAPIClient
	ec2.DescribeInstancesAPIClient
	ec2.DescribeLaunchTemplatesAPIClient
	CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DeleteLaunchTemplate(ctx context.Context, in *ec2.DeleteLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error)
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
}

var _ EC2 = (*ec2.Client)(nil)

// Pricing is what the provider asks of the Pricing API; *pricing.Client
// satisfies it.
type Pricing interface {
	pricing.GetProductsAPIClient
}
