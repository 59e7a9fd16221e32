package fake

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// World is the account the fake plays: a VPC's subnets and security
// groups, AMIs and the SSM parameters that publish them, IAM roles and
// instance profiles.
type World struct {
	VPCID            string
	Subnets          []Subnet
	SecurityGroups   []SecurityGroup
	Images           []Image
	Parameters       map[string]string
	InstanceProfiles []InstanceProfile
	// Roles are IAM roles that may be put in instance profiles.
	Roles []string
	// Queues are SQS queues by name.
	Queues []string
}

// Subnet is a subnet of the VPC.
type Subnet struct {
	ID, Zone, ZoneID, CIDR string
	AvailableIPs           int
	Tags                   map[string]string
}

// SecurityGroup is a security group of the VPC.
type SecurityGroup struct {
	ID, Name, Description string
	Tags                  map[string]string
}

// Image is an AMI.
type Image struct {
	ID, Name, Owner, Architecture, CreationDate string
	// Deprecated images are still described, with a deprecation time.
	DeprecationTime string
	Tags            map[string]string
}

// InstanceProfile is an IAM instance profile and the role in it.
type InstanceProfile struct {
	Name, ID, Role string
	Tags           map[string]string
}

// The owners AMIs are published by: Amazon EKS and Bottlerocket.
const (
	OwnerAmazon       = "137112412989"
	OwnerBottlerocket = "651937483462"
)

// DefaultWorld is what an EKS user of cluster name would have: a VPC with
// a subnet in each of us-east-1a/b/c and a security group, all tagged
// karpenter.sh/discovery=name; the role KarpenterNodeRole-name with an
// instance profile; and current AL2023 and Bottlerocket AMIs (amd64 and
// arm64, standard and NVIDIA) for each Kubernetes version, published under
// the SSM parameters their aliases resolve through.
func DefaultWorld(name string, kubernetesVersions ...string) World {
	if len(kubernetesVersions) == 0 {
		kubernetesVersions = []string{"1.30", "1.31", "1.32", "1.33", "1.34", "1.35", "1.36", "1.37"}
	}
	discovery := map[string]string{"karpenter.sh/discovery": name}
	w := World{VPCID: "vpc-0fake0000000000001", Parameters: map[string]string{}}
	for i, zone := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		tags := maps.Clone(discovery)
		tags["Name"] = fmt.Sprintf("%s-private-%s", name, zone)
		w.Subnets = append(w.Subnets, Subnet{ID: fmt.Sprintf("subnet-0fake%013d", i+1), Zone: zone, ZoneID: fmt.Sprintf("use1-az%d", i+1),
			CIDR: fmt.Sprintf("10.0.%d.0/19", 32*i), AvailableIPs: 8000, Tags: tags})
	}
	sgTags := maps.Clone(discovery)
	sgTags["Name"] = name + "-node"
	w.SecurityGroups = []SecurityGroup{{ID: "sg-0fake00000000001", Name: "eks-cluster-sg-" + name, Description: "EKS node security group", Tags: sgTags}}
	role := "KarpenterNodeRole-" + name
	w.InstanceProfiles = []InstanceProfile{{Name: role, ID: "AIPAFAKE0000000000001", Role: role}}
	w.Roles = []string{role}
	w.Queues = []string{name}
	n := 0
	image := func(owner, imageName, arch string) string {
		n++
		id := fmt.Sprintf("ami-0fake%012d", n)
		w.Images = append(w.Images, Image{ID: id, Name: imageName, Owner: owner, Architecture: arch, CreationDate: "2026-11-01T00:00:00.000Z"})
		return id
	}
	for _, v := range kubernetesVersions {
		for _, arch := range []struct{ ec2, ssm string }{{"x86_64", "x86_64"}, {"arm64", "arm64"}} {
			for _, variant := range []string{"standard", "nvidia"} {
				id := image(OwnerAmazon, fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-v20261101", arch.ssm, variant, v), arch.ec2)
				w.Parameters[fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/recommended/image_id", v, arch.ssm, variant)] = id
			}
			id := image(OwnerBottlerocket, fmt.Sprintf("bottlerocket-aws-k8s-%s-%s-v1.50.0", v, arch.ssm), arch.ec2)
			w.Parameters[fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s/%s/latest/image_id", v, arch.ssm)] = id
			id = image(OwnerBottlerocket, fmt.Sprintf("bottlerocket-aws-k8s-%s-nvidia-%s-v1.50.0", v, arch.ssm), arch.ec2)
			w.Parameters[fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s-nvidia/%s/latest/image_id", v, arch.ssm)] = id
		}
	}
	return w
}

// clone copies the world so the fake's changes stay its own.
func (w World) clone() World {
	out := w
	out.Subnets = slices.Clone(w.Subnets)
	out.SecurityGroups = slices.Clone(w.SecurityGroups)
	out.Images = slices.Clone(w.Images)
	out.Parameters = maps.Clone(w.Parameters)
	if out.Parameters == nil {
		out.Parameters = map[string]string{}
	}
	out.InstanceProfiles = slices.Clone(w.InstanceProfiles)
	out.Roles = slices.Clone(w.Roles)
	out.Queues = slices.Clone(w.Queues)
	return out
}

// hasPrefixFold reports whether s starts with prefix, ignoring case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
