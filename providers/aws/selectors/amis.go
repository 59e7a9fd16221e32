package selectors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
)

// SSM is what the resolver asks of SSM.
type SSM interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// variant is one image an alias stands for: an architecture and whether it
// carries the NVIDIA drivers.
type variant struct {
	arch   string // EC2's: x86_64 or arm64
	nvidia bool
}

var variants = []variant{{"x86_64", false}, {"arm64", false}, {"x86_64", true}, {"arm64", true}}

// aliasParameter is the SSM parameter publishing family@version's image
// of a variant for a Kubernetes version, or "" if the family has none.
func aliasParameter(family, version, kubernetes string, v variant) string {
	switch family {
	case "al2023":
		flavour := "standard"
		if v.nvidia {
			flavour = "nvidia"
		}
		release := "recommended"
		if version != "latest" {
			release = fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", v.arch, flavour, kubernetes, version)
		}
		return fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/%s/image_id", kubernetes, v.arch, flavour, release)
	case "bottlerocket":
		suffix := ""
		if v.nvidia {
			suffix = "-nvidia"
		}
		return fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s%s/%s/%s/image_id", kubernetes, suffix, v.arch, strings.TrimPrefix(version, "v"))
	}
	return ""
}

// requirements are what an instance type must meet to boot an image of
// the variant: its architecture, and a GPU for the NVIDIA images, none for
// the others (as Karpenter's).
func (v variant) requirements() []corev1.NodeSelectorRequirement {
	gpu := corev1.NodeSelectorOpDoesNotExist
	if v.nvidia {
		gpu = corev1.NodeSelectorOpExists
	}
	reqs := []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{kubeArch(v.arch)}},
		{Key: awsv1.LabelInstanceGPUCount, Operator: gpu},
	}
	if !v.nvidia {
		reqs = append(reqs, corev1.NodeSelectorRequirement{Key: awsv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist})
	}
	return reqs
}

func kubeArch(ec2Arch string) string {
	if ec2Arch == "x86_64" {
		return "amd64"
	}
	return ec2Arch
}

// AMIs resolves AMI selector terms for a Kubernetes version ("1.34"):
// aliases through their SSM parameters (every variant the family
// publishes), other terms through DescribeImages. Newest first, deprecated
// images last.
func AMIs(ctx context.Context, ec2api EC2, ssmapi SSM, terms []awsv1.AMISelectorTerm, kubernetes string) ([]awsv1.AMI, error) {
	var out []awsv1.AMI
	created := map[string]string{}
	seen := map[string]bool{}
	add := func(im ec2types.Image, reqs []corev1.NodeSelectorRequirement) {
		id := aws.ToString(im.ImageId)
		if seen[id] {
			return
		}
		seen[id] = true
		created[id] = aws.ToString(im.CreationDate)
		if reqs == nil {
			reqs = []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{kubeArch(string(im.Architecture))}}}
		}
		out = append(out, awsv1.AMI{ID: id, Name: aws.ToString(im.Name), Deprecated: aws.ToString(im.DeprecationTime) != "", Requirements: reqs})
	}
	for i, term := range terms {
		if term.Alias != "" {
			if err := resolveAlias(ctx, ec2api, ssmapi, term.Alias, kubernetes, add); err != nil {
				return nil, fmt.Errorf("amiSelectorTerms[%d].alias %q: %w", i, term.Alias, err)
			}
			continue
		}
		in := &ec2.DescribeImagesInput{Filters: tagFilters(term.Tags)}
		if term.ID != "" {
			in.ImageIds = []string{term.ID}
		}
		if term.Name != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("name"), Values: []string{term.Name}})
			in.Owners = []string{"self", "amazon"}
		}
		if term.Owner != "" {
			in.Owners = []string{term.Owner}
		}
		pages := ec2.NewDescribeImagesPaginator(ec2api, in)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("amiSelectorTerms[%d]: describing images: %w", i, err)
			}
			for _, im := range page.Images {
				add(im, nil)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b awsv1.AMI) int {
		if a.Deprecated != b.Deprecated {
			if a.Deprecated {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(created[b.ID], created[a.ID]), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// resolveAlias reads every variant's parameter of family@version; a variant
// the family does not publish for the version is skipped, but at least one
// must exist.
func resolveAlias(ctx context.Context, ec2api EC2, ssmapi SSM, alias, kubernetes string, add func(ec2types.Image, []corev1.NodeSelectorRequirement)) error {
	family, version, _ := strings.Cut(alias, "@")
	family = strings.ToLower(family)
	byID := map[string]variant{}
	var ids []string
	for _, v := range variants {
		name := aliasParameter(family, version, kubernetes, v)
		if name == "" {
			return fmt.Errorf("family %s is not supported (al2023 and bottlerocket are)", family)
		}
		p, err := ssmapi.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
		var missing *ssmtypes.ParameterNotFound
		if errors.As(err, &missing) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading SSM parameter %s: %w", name, err)
		}
		id := aws.ToString(p.Parameter.Value)
		byID[id] = v
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return fmt.Errorf("no image is published for Kubernetes %s (no SSM parameter such as %s)", kubernetes, aliasParameter(family, version, kubernetes, variants[0]))
	}
	images, err := ec2api.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: ids})
	if err != nil {
		return fmt.Errorf("describing images %v: %w", ids, err)
	}
	for _, im := range images.Images {
		add(im, byID[aws.ToString(im.ImageId)].requirements())
	}
	return nil
}
