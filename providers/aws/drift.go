package aws

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/pkg/cloudprovider"
)

// Drift reasons of the AWS provider, as Karpenter's.
const (
	DriftAMI           cloudprovider.DriftReason = "AMIDrift"
	DriftSubnet        cloudprovider.DriftReason = "SubnetDrift"
	DriftSecurityGroup cloudprovider.DriftReason = "SecurityGroupDrift"
	DriftNodeClass     cloudprovider.DriftReason = "NodeClassDrift"
)

// IsDrifted implements cloudprovider.CloudProvider: an instance drifts
// when its image is no longer among its NodeClass's resolved AMIs, its
// subnet among the subnets, its security groups are not the resolved
// ones, or the NodeClass's spec changed since launch (its hash). A
// NodeClass that is not Ready says nothing (no drift).
func (p *Provider) IsDrifted(ctx context.Context, nc *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	class, err := p.nodeClass(ctx, nc.Spec.NodeClassRef)
	if err != nil {
		return "", nil
	}
	if hash, err := Hash(class); err == nil && nc.Annotations[awsv1.AnnotationNodeClassHashVersion] == HashVersion &&
		nc.Annotations[awsv1.AnnotationNodeClassHash] != "" && nc.Annotations[awsv1.AnnotationNodeClassHash] != hash {
		return DriftNodeClass, nil
	}
	id, err := InstanceID(nc.Status.ProviderID)
	if err != nil {
		return "", nil // not launched yet
	}
	in, found, err := p.describedRecently(ctx, id)
	if err != nil {
		return "", fmt.Errorf("drift of nodeclaim %s: %w", nc.Name, err)
	}
	if !found {
		return "", nil // gone: garbage collection's business
	}
	if len(class.Status.AMIs) > 0 && !slices.ContainsFunc(class.Status.AMIs, func(a awsv1.AMI) bool { return a.ID == aws.ToString(in.ImageId) }) {
		return DriftAMI, nil
	}
	if len(class.Status.Subnets) > 0 && !slices.ContainsFunc(class.Status.Subnets, func(s awsv1.Subnet) bool { return s.ID == aws.ToString(in.SubnetId) }) {
		return DriftSubnet, nil
	}
	var have, want []string
	for _, g := range in.SecurityGroups {
		have = append(have, aws.ToString(g.GroupId))
	}
	for _, g := range class.Status.SecurityGroups {
		want = append(want, g.ID)
	}
	slices.Sort(have)
	slices.Sort(want)
	if len(want) > 0 && !slices.Equal(have, want) {
		return DriftSecurityGroup, nil
	}
	return "", nil
}
