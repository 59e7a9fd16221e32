package aws

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/mitchellh/hashstructure/v2"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/providers/aws/userdata"
)

// HashVersion versions Hash.
const HashVersion = "v1"

// Hash fingerprints an EC2NodeClass's spec for drift: selector terms
// and the kubelet settings do not count (drift from them is read off the
// resolved status and the instance types), list order does not, and an
// empty value counts as absent.
func Hash(class *awsv1.EC2NodeClass) (string, error) {
	h, err := hashstructure.Hash(class.Spec, hashstructure.FormatV2, &hashstructure.HashOptions{SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true})
	if err != nil {
		return "", fmt.Errorf("hashing ec2nodeclass %s: %w", class.Name, err)
	}
	return strconv.FormatUint(h, 10), nil
}

// launchTemplateData is what a launch template holds; its hash names it.
type launchTemplateData struct {
	Cluster, NodeClass, Image, InstanceProfile, UserData string
	SecurityGroups                                       []string
	Metadata                                             *awsv1.MetadataOptions
	BlockDevices                                         []*awsv1.BlockDeviceMapping
	PublicIP, Monitoring                                 *bool
}

// ensureLaunchTemplate makes (once) the launch template of a NodeClass,
// image and NodeClaim shape, and returns its name.
func (p *Provider) ensureLaunchTemplate(ctx context.Context, class *awsv1.EC2NodeClass, nc *karpv1.NodeClaim, image string) (string, error) {
	ud, err := p.userData(class, nc)
	if err != nil {
		return "", err
	}
	data := launchTemplateData{Cluster: p.opts.ClusterName, NodeClass: class.Name, Image: image, InstanceProfile: class.Status.InstanceProfile,
		UserData: ud, Metadata: class.Spec.MetadataOptions, BlockDevices: class.Spec.BlockDeviceMappings,
		PublicIP: class.Spec.AssociatePublicIPAddress, Monitoring: class.Spec.DetailedMonitoring}
	for _, sg := range class.Status.SecurityGroups {
		data.SecurityGroups = append(data.SecurityGroups, sg.ID)
	}
	h, err := hashstructure.Hash(data, hashstructure.FormatV2, nil)
	if err != nil {
		return "", fmt.Errorf("hashing the launch template of ec2nodeclass %s: %w", class.Name, err)
	}
	name := fmt.Sprintf("%s/%d", awsv1.Group, h)
	p.templatesMu.Lock()
	_, known := p.templates[name]
	if known {
		p.templates[name] = p.clock.Now()
	}
	p.templatesMu.Unlock()
	if known {
		return name, nil
	}
	ltTags := []ec2types.Tag{{Key: aws.String(TagCluster), Value: aws.String(p.opts.ClusterName)}, {Key: aws.String(TagNodeClass), Value: aws.String(class.Name)},
		{Key: aws.String(fmt.Sprintf(tagClusterFmt, p.opts.ClusterName)), Value: aws.String("owned")}}
	req := &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image), UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(ud))),
		SecurityGroupIds: data.SecurityGroups, MetadataOptions: metadataOptions(class.Spec.MetadataOptions),
		BlockDeviceMappings: blockDevices(class), TagSpecifications: nil}
	if class.Status.InstanceProfile != "" {
		req.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(class.Status.InstanceProfile)}
	}
	if class.Spec.DetailedMonitoring != nil {
		req.Monitoring = &ec2types.LaunchTemplatesMonitoringRequest{Enabled: class.Spec.DetailedMonitoring}
	}
	if class.Spec.AssociatePublicIPAddress != nil {
		req.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{
			DeviceIndex: aws.Int32(0), AssociatePublicIpAddress: class.Spec.AssociatePublicIPAddress, Groups: data.SecurityGroups}}
		req.SecurityGroupIds = nil
	}
	_, err = p.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: req,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: ltTags}}})
	if err != nil && !IsErrorCode(err, "InvalidLaunchTemplateName.AlreadyExistsException") {
		return "", fmt.Errorf("creating launch template %s for ec2nodeclass %s: %w", name, class.Name, err)
	}
	p.templatesMu.Lock()
	p.templates[name] = p.clock.Now()
	p.templatesMu.Unlock()
	return name, nil
}

func (p *Provider) forgetTemplate(name string) {
	p.templatesMu.Lock()
	defer p.templatesMu.Unlock()
	delete(p.templates, name)
}

// metadataOptions are Karpenter's defaults (IMDSv2 required, hop limit 1)
// under the NodeClass's settings.
func metadataOptions(m *awsv1.MetadataOptions) *ec2types.LaunchTemplateInstanceMetadataOptionsRequest {
	out := &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
		HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1),
		HttpProtocolIpv6: ec2types.LaunchTemplateInstanceMetadataProtocolIpv6Disabled}
	if m == nil {
		return out
	}
	if m.HTTPEndpoint != nil {
		out.HttpEndpoint = ec2types.LaunchTemplateInstanceMetadataEndpointState(*m.HTTPEndpoint)
	}
	if m.HTTPTokens != nil {
		out.HttpTokens = ec2types.LaunchTemplateHttpTokensState(*m.HTTPTokens)
	}
	if m.HTTPPutResponseHopLimit != nil {
		out.HttpPutResponseHopLimit = aws.Int32(int32(*m.HTTPPutResponseHopLimit))
	}
	if m.HTTPProtocolIPv6 != nil {
		out.HttpProtocolIpv6 = ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(*m.HTTPProtocolIPv6)
	}
	return out
}

// blockDevices are the NodeClass's mappings, or the family's default root
// volume (20Gi gp3, encrypted).
func blockDevices(class *awsv1.EC2NodeClass) []ec2types.LaunchTemplateBlockDeviceMappingRequest {
	mappings := class.Spec.BlockDeviceMappings
	if len(mappings) == 0 {
		device := "/dev/xvda"
		if family(class) == familyBottlerocket {
			return []ec2types.LaunchTemplateBlockDeviceMappingRequest{
				{DeviceName: aws.String("/dev/xvda"), Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(4), VolumeType: ec2types.VolumeTypeGp3, Encrypted: aws.Bool(true)}},
				{DeviceName: aws.String("/dev/xvdb"), Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(20), VolumeType: ec2types.VolumeTypeGp3, Encrypted: aws.Bool(true)}},
			}
		}
		return []ec2types.LaunchTemplateBlockDeviceMappingRequest{{DeviceName: aws.String(device),
			Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(20), VolumeType: ec2types.VolumeTypeGp3, Encrypted: aws.Bool(true)}}}
	}
	var out []ec2types.LaunchTemplateBlockDeviceMappingRequest
	for _, m := range mappings {
		if m == nil {
			continue
		}
		r := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: m.DeviceName}
		if e := m.EBS; e != nil {
			r.Ebs = &ec2types.LaunchTemplateEbsBlockDeviceRequest{Encrypted: e.Encrypted, DeleteOnTermination: e.DeleteOnTermination,
				Iops: int32Of(e.IOPS), Throughput: int32Of(e.Throughput), KmsKeyId: e.KMSKeyID, SnapshotId: e.SnapshotID}
			if e.VolumeType != nil {
				r.Ebs.VolumeType = ec2types.VolumeType(*e.VolumeType)
			}
			if e.VolumeSize != nil {
				r.Ebs.VolumeSize = aws.Int32(int32(e.VolumeSize.ScaledValue(resource.Giga)))
				if gib := e.VolumeSize.Value() >> 30; gib > 0 && e.VolumeSize.Value()%(1<<30) == 0 {
					r.Ebs.VolumeSize = aws.Int32(int32(gib))
				}
			}
		}
		out = append(out, r)
	}
	return out
}

// AMI families the provider writes user data for.
const (
	familyAL2023       = "AL2023"
	familyBottlerocket = "Bottlerocket"
	familyCustom       = "Custom"
)

// family is the NodeClass's AMI family: its alias's, else spec.amiFamily,
// else AL2023.
func family(class *awsv1.EC2NodeClass) string {
	for _, t := range class.Spec.AMISelectorTerms {
		if name, _, ok := strings.Cut(t.Alias, "@"); ok {
			switch strings.ToLower(name) {
			case "bottlerocket":
				return familyBottlerocket
			case "al2023":
				return familyAL2023
			}
		}
	}
	if class.Spec.AMIFamily != nil {
		switch strings.ToLower(*class.Spec.AMIFamily) {
		case "bottlerocket":
			return familyBottlerocket
		case "custom":
			return familyCustom
		}
	}
	return familyAL2023
}

// userData is the node's user data for the NodeClass's family.
func (p *Provider) userData(class *awsv1.EC2NodeClass, nc *karpv1.NodeClaim) (string, error) {
	custom := ""
	if class.Spec.UserData != nil {
		custom = *class.Spec.UserData
	}
	node := userdata.Node{ClusterName: p.opts.ClusterName, Endpoint: p.opts.ClusterEndpoint, CABundle: p.opts.ClusterCABundle,
		ServiceCIDR: p.opts.ClusterCIDR, Labels: nodeLabels(nc), Custom: custom,
		// The node registers tainted until Nodewright has synced it with its
		// NodeClaim.
		Taints:            append(append(slices.Clone(nc.Spec.Taints), nc.Spec.StartupTaints...), karpv1.UnregisteredNoExecuteTaint),
		LocalStorageRAID0: class.Spec.InstanceStorePolicy != nil && *class.Spec.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0}
	if k := class.Spec.Kubelet; k != nil {
		if k.MaxPods != nil {
			node.MaxPods = int64(*k.MaxPods)
		}
		node.ClusterDNS = k.ClusterDNS
	}
	var out string
	var err error
	switch family(class) {
	case familyBottlerocket:
		out, err = userdata.Bottlerocket(node)
	case familyCustom:
		out = custom
	default:
		out, err = userdata.AL2023(node)
	}
	if err != nil {
		return "", fmt.Errorf("ec2nodeclass %s: %w", class.Name, err)
	}
	return out, nil
}

// nodeLabels are the NodeClaim's labels a kubelet may register with (not
// the kubernetes.io and k8s.io ones the node restriction reserves), less
// the ones a launch chooses (launchChosen): registration copies those
// from the NodeClaim. The user data, and so the fleet request, is then the
// same before and after a launch's labels are recorded on the NodeClaim,
// and a retried launch repeats its client token's request exactly.
func nodeLabels(nc *karpv1.NodeClaim) map[string]string {
	out := map[string]string{}
	for k, v := range nc.Labels {
		domain, _, ok := strings.Cut(k, "/")
		if ok && (strings.HasSuffix(domain, "kubernetes.io") || strings.HasSuffix(domain, "k8s.io")) || launchChosen(k) {
			continue
		}
		out[k] = v
	}
	return out
}

// launchChosen: a label whose value the launch picks (the instance type's
// labels, the capacity type, the zone ID).
func launchChosen(key string) bool {
	return strings.HasPrefix(key, awsv1.Group+"/instance-") || key == karpv1.LabelCapacityType || key == labelZoneID
}
