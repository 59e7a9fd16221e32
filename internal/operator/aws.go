package operator

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsprovider "github.com/nodewright/nodewright/providers/aws"
	"github.com/nodewright/nodewright/providers/aws/nodeclass"
)

// AWSConfig configures the aws provider.
type AWSConfig struct {
	// SDK is the aws-sdk-go-v2 configuration (region, credentials, and the
	// endpoint when it is not AWS's, e.g. the fake's).
	SDK aws.Config
	// ClusterName tags and finds the cluster's instances.
	ClusterName string
	// ClusterEndpoint and ClusterCABundle (base64 PEM) are what nodes
	// join; the endpoint defaults to the API server the controller uses.
	ClusterEndpoint, ClusterCABundle string
	// KubernetesVersion ("1.37") picks the AMIs aliases resolve to; empty
	// asks the API server.
	KubernetesVersion string
	// InterruptionQueue is the SQS queue of interruption events ("": none).
	InterruptionQueue string
	// ShortPoll has the interruption queue polled without waiting (the
	// simulator polls on its virtual clock).
	ShortPoll bool
}

// buildAWS makes the aws provider and the EC2NodeClass controller.
func buildAWS(conf Config, kube client.Client, unavailable func(instanceType, zone, capacityType string) bool) (*awsprovider.Provider, *nodeclass.Controller, error) {
	a := conf.AWS
	if a.ClusterName == "" {
		return nil, nil, fmt.Errorf("the aws provider needs a cluster name (--cluster-name)")
	}
	ec2api := ec2.NewFromConfig(a.SDK)
	// The Pricing API answers in us-east-1 (and two other regions) for
	// every region.
	prices := pricing.NewFromConfig(a.SDK, func(o *pricing.Options) { o.Region = "us-east-1" })
	provider, err := awsprovider.New(kube, ec2api, awsprovider.Options{ClusterName: a.ClusterName, ClusterEndpoint: a.ClusterEndpoint,
		ClusterCABundle: a.ClusterCABundle, Region: a.SDK.Region, Pricing: prices, Unavailable: unavailable, Clock: conf.Clock, Log: conf.Logger.WithName("aws")})
	if err != nil {
		return nil, nil, err
	}
	classes := nodeclass.New(kube, ec2api, ssm.NewFromConfig(a.SDK), iam.NewFromConfig(a.SDK), conf.Clock,
		nodeclass.Options{ClusterName: a.ClusterName, Region: a.SDK.Region, KubernetesVersion: a.KubernetesVersion})
	return provider, classes, nil
}

// serverVersion is the API server's Kubernetes minor version, "1.37".
func serverVersion(restConfig *rest.Config) (string, error) {
	d, err := discovery.NewDiscoveryClientForConfig(restConfig)
	if err != nil {
		return "", fmt.Errorf("asking the API server its version: %w", err)
	}
	v, err := d.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("asking the API server its version: %w", err)
	}
	return fmt.Sprintf("%s.%s", v.Major, strings.TrimSuffix(v.Minor, "+")), nil
}
