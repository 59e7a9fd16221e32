package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/providers/aws/fake"
)

// The fake serves on loopback only, says where, and answers AWS calls.
func TestFakeAWSServesOnLoopback(t *testing.T) {
	if _, err := run(t, "fake-aws", "--cluster-name", "x", "--listen", "0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "only loopback") {
		t.Errorf("a non-loopback address: %v, want it refused", err)
	}
	if _, err := run(t, "fake-aws"); err == nil || !strings.Contains(err.Error(), "--cluster-name") {
		t.Errorf("no cluster name: %v, want it asked for", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	done := make(chan error, 1)
	server, err := fake.New(fake.Options{World: fake.DefaultWorld("x")})
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- serveFakeAWS(ctx, "127.0.0.1:0", server, w) }()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	endpoint := strings.Fields(line)[4]
	resp, err := http.Post(endpoint, "application/x-www-form-urlencoded", strings.NewReader("Action=DescribeSubnets&Version=2016-11-15&Filter.1.Name=tag:karpenter.sh/discovery&Filter.1.Value.1=x"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Count(string(body), "<subnetId>") != 3 {
		t.Errorf("DescribeSubnets: %d %s", resp.StatusCode, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fake did not stop")
	}
}

// --lose-launch-responses has CreateFleet launch and then drop its answer
// (the SDK's retries too); a rate outside [0, 1] names the flag.
func TestFakeAWSLosesLaunchResponses(t *testing.T) {
	if _, err := run(t, "fake-aws", "--cluster-name", "x", "--lose-launch-responses", "1.5"); err == nil || !strings.Contains(err.Error(), "--lose-launch-responses") {
		t.Errorf("a rate of 1.5: %v, want the flag named", err)
	}
	server, err := fake.New(fake.Options{World: fake.DefaultWorld("x")})
	if err != nil {
		t.Fatal(err)
	}
	if err := (fakeAWSFaults{loseLaunches: 1, seed: 7}).apply(server); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server)
	defer srv.Close()
	ctx := context.Background()
	client := ec2.NewFromConfig(fake.Config(srv.URL))
	if _, err := client.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("lt"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-0fake000000000001")}}); err != nil {
		t.Fatal(err)
	}
	_, err = client.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant, ClientToken: aws.String("t-1"),
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("lt"), Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", AvailabilityZone: aws.String("us-east-1a")}}}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand}})
	if err == nil {
		t.Error("CreateFleet answered although every answer is to be lost")
	}
	if n := len(server.Instances()); n != 1 {
		t.Errorf("%d instances after a launch whose answer was lost, want 1", n)
	}
	if n := server.Injected()["CreateFleet/lost"]; n != 1 {
		t.Errorf("%d lost CreateFleet answers counted, want 1 (the SDK's retries are the same call)", n)
	}
}
