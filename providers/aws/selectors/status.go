package selectors

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
)

// Condition types of an EC2NodeClass, as Karpenter's.
const (
	ConditionReady                = "Ready"
	ConditionSubnetsReady         = "SubnetsReady"
	ConditionSecurityGroupsReady  = "SecurityGroupsReady"
	ConditionAMIsReady            = "AMIsReady"
	ConditionInstanceProfileReady = "InstanceProfileReady"
)

// Resolve resolves a node class's selectors into its status for a
// Kubernetes version: subnets, security groups, AMIs, each with its
// condition, and Ready when all hold. A selector that matches nothing
// makes its condition (and Ready) False with a message naming the
// selector; a failing AWS call is returned as an error and leaves the
// status as it was. The instance profile is not resolved here.
func Resolve(ctx context.Context, ec2api EC2, ssmapi SSM, nc *awsv1.EC2NodeClass, kubernetes string, now metav1.Time) error {
	subnets, err := Subnets(ctx, ec2api, nc.Spec.SubnetSelectorTerms)
	if err != nil {
		return fmt.Errorf("ec2nodeclass %s: %w", nc.Name, err)
	}
	groups, err := SecurityGroups(ctx, ec2api, nc.Spec.SecurityGroupSelectorTerms)
	if err != nil {
		return fmt.Errorf("ec2nodeclass %s: %w", nc.Name, err)
	}
	amis, err := AMIs(ctx, ec2api, ssmapi, nc.Spec.AMISelectorTerms, kubernetes)
	if err != nil {
		return fmt.Errorf("ec2nodeclass %s: %w", nc.Name, err)
	}
	nc.Status.Subnets, nc.Status.SecurityGroups, nc.Status.AMIs = subnets, groups, amis
	set := func(t string, ok bool, reason, message string) { SetCondition(nc, t, ok, reason, message, now) }
	set(ConditionSubnetsReady, len(subnets) > 0, "SubnetsNotFound", "SubnetSelector did not match any Subnets: "+describe(nc.Spec.SubnetSelectorTerms))
	set(ConditionSecurityGroupsReady, len(groups) > 0, "SecurityGroupsNotFound", "SecurityGroupSelector did not match any SecurityGroups: "+describe(nc.Spec.SecurityGroupSelectorTerms))
	set(ConditionAMIsReady, len(amis) > 0, "AMINotFound", "AMISelector did not match any AMIs: "+describe(nc.Spec.AMISelectorTerms))
	SetReady(nc, now)
	return nil
}

// SetReady sets Ready from the other conditions: True when every one of
// them present is True, else False naming those that are not.
func SetReady(nc *awsv1.EC2NodeClass, now metav1.Time) {
	var notReady []string
	for _, t := range []string{ConditionSubnetsReady, ConditionSecurityGroupsReady, ConditionAMIsReady, ConditionInstanceProfileReady} {
		if c := meta.FindStatusCondition(nc.Status.Conditions, t); c != nil && c.Status != metav1.ConditionTrue {
			notReady = append(notReady, fmt.Sprintf("%s (%s)", t, c.Message))
		}
	}
	SetCondition(nc, ConditionReady, len(notReady) == 0, "NotReady", strings.Join(notReady, "; "), now)
}

// SetCondition sets one of the class's conditions: True with the type as
// its reason, or False with reason and message.
func SetCondition(nc *awsv1.EC2NodeClass, t string, ok bool, reason, message string, now metav1.Time) {
	c := metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t, ObservedGeneration: nc.Generation, LastTransitionTime: now}
	if !ok {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, reason, message
	}
	meta.SetStatusCondition(&nc.Status.Conditions, c)
}

// describe renders selector terms for a message.
func describe(terms any) string {
	b, err := json.Marshal(terms)
	if err != nil {
		return fmt.Sprint(terms)
	}
	return string(b)
}
