package fake

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	clocktesting "k8s.io/utils/clock/testing"
)

// inProcess is an EC2 client calling a fake of the default world in
// process, on a fake clock, with a launch template "lt" to launch from.
func inProcess(t *testing.T) (*Server, *ec2.Client, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	f, err := New(Options{World: DefaultWorld("test"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	c := ec2.NewFromConfig(InProcessConfig(f))
	if _, err := c.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("lt"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-0fake000000000001")}}); err != nil {
		t.Fatal(err)
	}
	return f, c, clk
}

// fleet is a one-instance instant fleet over instance types in
// us-east-1a, tagged for a NodeClaim.
func fleet(token string, types ...string) *ec2.CreateFleetInput {
	cfg := ec2types.FleetLaunchTemplateConfigRequest{LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
		LaunchTemplateName: aws.String("lt"), Version: aws.String("$Latest")}}
	for _, it := range types {
		cfg.Overrides = append(cfg.Overrides, ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(it), AvailabilityZone: aws.String("us-east-1a")})
	}
	in := &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant, LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{cfg},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
			Tags: []ec2types.Tag{{Key: aws.String("karpenter.sh/nodeclaim"), Value: aws.String("web-1")}}}}}
	if token != "" {
		in.ClientToken = aws.String(token)
	}
	return in
}

func launchedIDs(out *ec2.CreateFleetOutput) []string {
	var ids []string
	for _, in := range out.Instances {
		ids = append(ids, in.InstanceIds...)
	}
	return ids
}

func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// A CreateFleet repeated with its client token and parameters answers as
// the first did and launches nothing more; with other parameters it is
// refused; without a token (or with another) it launches again.
func TestCreateFleetIsIdempotentPerClientToken(t *testing.T) {
	f, c, _ := inProcess(t)
	ctx := context.Background()
	first, err := c.CreateFleet(ctx, fleet("nc-uid-1", "m5.large"))
	if err != nil || len(launchedIDs(first)) != 1 {
		t.Fatalf("first launch: %v, %v", first, err)
	}
	again, err := c.CreateFleet(ctx, fleet("nc-uid-1", "m5.large"))
	if err != nil {
		t.Fatalf("repeated launch: %v", err)
	}
	if aws.ToString(again.FleetId) != aws.ToString(first.FleetId) || launchedIDs(again)[0] != launchedIDs(first)[0] {
		t.Errorf("repeated launch answered fleet %s %v, want the first answer: fleet %s %v",
			aws.ToString(again.FleetId), launchedIDs(again), aws.ToString(first.FleetId), launchedIDs(first))
	}
	if n := len(f.Instances()); n != 1 {
		t.Errorf("%d instances after a repeated launch, want 1", n)
	}
	_, err = c.CreateFleet(ctx, fleet("nc-uid-1", "m5.large", "c5.large"))
	if code := errorCode(err); code != "IdempotentParameterMismatch" {
		t.Errorf("the token with other parameters: %v, want IdempotentParameterMismatch", err)
	}
	if _, err := c.CreateFleet(ctx, fleet("nc-uid-2", "m5.large")); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Instances()); n != 2 {
		t.Errorf("%d instances after a launch with another token, want 2", n)
	}
}

// A launch whose answer is lost has happened: the instances exist and the
// caller got an error; repeating it with the token gets the answer.
func TestLostCreateFleetResponse(t *testing.T) {
	f, c, _ := inProcess(t)
	ctx := context.Background()
	f.Fail("CreateFleet", LostResponse, 1)
	if _, err := c.CreateFleet(ctx, fleet("nc-uid-1", "m5.large")); err == nil {
		t.Fatal("a lost answer reached the caller as a success")
	}
	launched := f.Instances()
	if len(launched) != 1 {
		t.Fatalf("%d instances after a launch whose answer was lost, want 1", len(launched))
	}
	out, err := c.CreateFleet(ctx, fleet("nc-uid-1", "m5.large"))
	if err != nil || launchedIDs(out)[0] != launched[0].ID {
		t.Errorf("the retry: %v, %v; want instance %s", out, err, launched[0].ID)
	}
	if n := len(f.Instances()); n != 1 {
		t.Errorf("%d instances after the retry, want 1", n)
	}
	// Reported as a 500: the SDK retries (with the same token, so nothing
	// more is launched), every retry of the lost call is lost too, and the
	// caller gets the 500.
	f.Fail("CreateFleet", LostWith500, 1)
	before := f.Requests("CreateFleet")
	_, err = c.CreateFleet(ctx, fleet("nc-uid-2", "m5.large"))
	if errorCode(err) != "InternalError" || len(f.Instances()) != 2 {
		t.Errorf("a 500 after the launch: %v and %d instances; want InternalError and 2 instances", err, len(f.Instances()))
	}
	if n := f.Requests("CreateFleet") - before; n != 3 {
		t.Errorf("%d attempts of the lost call, want the SDK's 3", n)
	}
	if got := f.Injected()["CreateFleet/lost"]; got != 2 {
		t.Errorf("Injected()[CreateFleet/lost] = %d, want 2", got)
	}
}

// Lost answers at a rate come from the caller's seed: the same seed, the
// same calls lost.
func TestLoseResponsesAtASeededRate(t *testing.T) {
	lost := func(seed uint64) []bool {
		f, c, _ := inProcess(t)
		f.LoseResponses("CreateFleet", 0.5, rand.New(rand.NewPCG(seed, 0)))
		var out []bool
		for i := range 40 {
			_, err := c.CreateFleet(context.Background(), fleet(string(rune('a'+i%26))+"-token-"+string(rune('0'+i/26)), "m5.large"))
			out = append(out, err != nil)
		}
		if n := len(f.Instances()); n != 40 {
			t.Errorf("%d instances after 40 launches, lost answers or not; want 40", n)
		}
		return out
	}
	a, b := lost(7), lost(7)
	count := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("call %d: lost %v with seed 7, then %v", i, a[i], b[i])
		}
		if a[i] {
			count++
		}
	}
	if count < 8 || count > 32 {
		t.Errorf("%d of 40 answers lost at rate 0.5", count)
	}
}

// With a describe lag, an instance just launched is not described (by id
// or by tag) until the lag has passed, as EC2 is eventually consistent.
func TestDescribeInstancesLagsLaunches(t *testing.T) {
	f, c, clk := inProcess(t)
	ctx := context.Background()
	f.SetDescribeLag(5 * time.Second)
	out, err := c.CreateFleet(ctx, fleet("nc-uid-1", "m5.large"))
	if err != nil {
		t.Fatal(err)
	}
	id := launchedIDs(out)[0]
	byTag := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/nodeclaim"), Values: []string{"web-1"}}}}
	if got, err := c.DescribeInstances(ctx, byTag); err != nil || len(got.Reservations) != 0 {
		t.Errorf("by tag within the lag: %v, %v; want nothing", got, err)
	}
	if _, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}); errorCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("by id within the lag: %v, want InvalidInstanceID.NotFound", err)
	}
	clk.Step(5 * time.Second)
	if got, err := c.DescribeInstances(ctx, byTag); err != nil || len(got.Reservations) != 1 {
		t.Errorf("by tag after the lag: %v, %v; want the instance", got, err)
	}
}
