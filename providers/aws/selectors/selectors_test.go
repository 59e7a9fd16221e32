package selectors

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	"github.com/nodewright/nodewright/providers/aws/fake"
)

// apis are SDK clients on a fake of the default world for cluster "demo".
func apis(t *testing.T) (*fake.Server, *ec2.Client, *ssm.Client) {
	t.Helper()
	f, err := fake.New(fake.Options{World: fake.DefaultWorld("demo")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := fake.InProcessConfig(f)
	return f, ec2.NewFromConfig(cfg), ssm.NewFromConfig(cfg)
}

func TestSubnetsAndSecurityGroups(t *testing.T) {
	_, ec2c, _ := apis(t)
	ctx := context.Background()
	cases := []struct {
		name  string
		terms []awsv1.SubnetSelectorTerm
		want  int
	}{
		{"discovery tag", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}}, 3},
		{"any value", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "*"}}}, 3},
		{"terms ORed, no duplicates", []awsv1.SubnetSelectorTerm{{ID: "subnet-0fake0000000000001"}, {Tags: map[string]string{"Name": "demo-private-us-east-1a"}}, {ID: "subnet-0fake0000000000003"}}, 2},
		{"fields ANDed", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo", "Name": "demo-private-us-east-1c"}}}, 1},
		{"nothing matches", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "someone-else"}}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Subnets(ctx, ec2c, tc.terms)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Fatalf("subnets %+v, want %d", got, tc.want)
			}
			for _, sn := range got {
				if sn.Zone == "" || sn.ZoneID == "" {
					t.Errorf("subnet %+v without its zone", sn)
				}
			}
		})
	}
	sgs, err := SecurityGroups(ctx, ec2c, []awsv1.SecurityGroupSelectorTerm{{Name: "eks-cluster-sg-demo"}, {Tags: map[string]string{"karpenter.sh/discovery": "demo"}}})
	if err != nil || len(sgs) != 1 || sgs[0].Name != "eks-cluster-sg-demo" {
		t.Fatalf("security groups %+v, %v: want the cluster's one, once", sgs, err)
	}
}

// requirement finds a requirement on key.
func requirement(ami awsv1.AMI, key string) (corev1.NodeSelectorRequirement, bool) {
	for _, r := range ami.Requirements {
		if r.Key == key {
			return r, true
		}
	}
	return corev1.NodeSelectorRequirement{}, false
}

// An alias stands for every variant its family publishes for the cluster's
// Kubernetes version: amd64 and arm64, with and without NVIDIA drivers,
// each with the requirements that keep it on instance types it boots.
func TestAMIAliases(t *testing.T) {
	_, ec2c, ssmc := apis(t)
	ctx := context.Background()
	for _, alias := range []string{"al2023@latest", "bottlerocket@latest"} {
		t.Run(alias, func(t *testing.T) {
			amis, err := AMIs(ctx, ec2c, ssmc, []awsv1.AMISelectorTerm{{Alias: alias}}, "1.34")
			if err != nil {
				t.Fatal(err)
			}
			if len(amis) != 4 {
				t.Fatalf("%d AMIs, want 4 (2 architectures × standard/NVIDIA)", len(amis))
			}
			kinds := map[string]int{}
			for _, ami := range amis {
				arch, _ := requirement(ami, corev1.LabelArchStable)
				gpu, ok := requirement(ami, awsv1.LabelInstanceGPUCount)
				if !ok || len(arch.Values) != 1 || !strings.Contains(ami.Name, "1.34") {
					t.Errorf("AMI %+v: want an architecture and a GPU requirement, of Kubernetes 1.34", ami)
				}
				kinds[arch.Values[0]+"/"+string(gpu.Operator)]++
			}
			for _, k := range []string{"amd64/Exists", "amd64/DoesNotExist", "arm64/Exists", "arm64/DoesNotExist"} {
				if kinds[k] != 1 {
					t.Errorf("AMIs by arch/GPU %v: want one %s", kinds, k)
				}
			}
		})
	}
	_, err := AMIs(ctx, ec2c, ssmc, []awsv1.AMISelectorTerm{{Alias: "al2023@v20990101"}}, "1.34")
	if err == nil || !strings.Contains(err.Error(), `amiSelectorTerms[0].alias "al2023@v20990101"`) {
		t.Errorf("an unpublished version: %v, want an error naming the term", err)
	}
	_, err = AMIs(ctx, ec2c, ssmc, []awsv1.AMISelectorTerm{{Alias: "windows2022@latest"}}, "1.34")
	if err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("windows: %v, want not supported", err)
	}
}

// Name, owner, id and tag terms go through DescribeImages; the image's own
// architecture becomes its requirement.
func TestAMITerms(t *testing.T) {
	_, ec2c, ssmc := apis(t)
	ctx := context.Background()
	amis, err := AMIs(ctx, ec2c, ssmc, []awsv1.AMISelectorTerm{{Name: "bottlerocket-aws-k8s-1.33-*", Owner: fake.OwnerBottlerocket}}, "1.34")
	if err != nil || len(amis) != 4 {
		t.Fatalf("by name and owner: %+v, %v: want 4", amis, err)
	}
	byID, err := AMIs(ctx, ec2c, ssmc, []awsv1.AMISelectorTerm{{ID: amis[0].ID}}, "1.34")
	if err != nil || len(byID) != 1 || byID[0].Name != amis[0].Name {
		t.Fatalf("by id: %+v, %v", byID, err)
	}
	if r, ok := requirement(byID[0], corev1.LabelArchStable); !ok || len(r.Values) != 1 {
		t.Errorf("requirements %+v: want the image's architecture", byID[0].Requirements)
	}
	none, err := AMIs(ctx, ec2c, ssmc, []awsv1.AMISelectorTerm{{Tags: map[string]string{"team": "nobody"}}}, "1.34")
	if err != nil || len(none) != 0 {
		t.Errorf("a tag nothing carries: %+v, %v", none, err)
	}
}

// A failing call names the term it was for.
func TestResolutionErrorsNameTheTerm(t *testing.T) {
	f, ec2c, _ := apis(t)
	f.Fail("DescribeSubnets", fake.Fault{Status: 403, Code: "UnauthorizedOperation", Message: "not allowed"}, 1)
	_, err := Subnets(context.Background(), ec2c, []awsv1.SubnetSelectorTerm{{ID: "subnet-0fake0000000000001"}})
	if err == nil || !strings.Contains(err.Error(), "subnetSelectorTerms[0]") || !strings.Contains(err.Error(), "UnauthorizedOperation") {
		t.Errorf("error %v: want the term and AWS's code", err)
	}
}

// A node class's status lists what its selectors match; a selector that
// matches nothing makes it not Ready with a message naming the selector.
func TestResolveStatus(t *testing.T) {
	_, ec2c, ssmc := apis(t)
	ctx := context.Background()
	nc := &awsv1.EC2NodeClass{}
	nc.Name, nc.Generation = "default", 3
	nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}}
	nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}}
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}
	now := metav1.Now()
	if err := Resolve(ctx, ec2c, ssmc, nc, "1.34", now); err != nil {
		t.Fatal(err)
	}
	if len(nc.Status.Subnets) != 3 || len(nc.Status.SecurityGroups) != 1 || len(nc.Status.AMIs) != 4 || !meta.IsStatusConditionTrue(nc.Status.Conditions, ConditionReady) {
		t.Fatalf("status %+v: want 3 subnets, 1 group, 4 AMIs, Ready", nc.Status)
	}
	nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "typo"}}}
	if err := Resolve(ctx, ec2c, ssmc, nc, "1.34", now); err != nil {
		t.Fatal(err)
	}
	subnets := meta.FindStatusCondition(nc.Status.Conditions, ConditionSubnetsReady)
	if subnets == nil || subnets.Status != metav1.ConditionFalse || !strings.Contains(subnets.Message, `"karpenter.sh/discovery":"typo"`) {
		t.Errorf("SubnetsReady %+v: want False naming the selector", subnets)
	}
	if meta.IsStatusConditionTrue(nc.Status.Conditions, ConditionReady) {
		t.Error("Ready with no subnet")
	}
}
