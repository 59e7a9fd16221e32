package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/pflag"

	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/providers/aws/fake"
	"github.com/nodewright/nodewright/providers/aws/transport"
)

// awsOptions are the flags of the aws provider.
type awsOptions struct {
	clusterName, clusterEndpoint, clusterCABundle, region, endpoint, kubernetesVersion, interruptionQueue string
}

func (o *awsOptions) register(f *pflag.FlagSet) {
	f.StringVar(&o.clusterName, "cluster-name", envDefault("CLUSTER_NAME", ""), "aws: the cluster's name, which its instances and discovery tags carry (env CLUSTER_NAME)")
	f.StringVar(&o.clusterEndpoint, "cluster-endpoint", envDefault("CLUSTER_ENDPOINT", ""), "aws: the API server URL nodes join (env CLUSTER_ENDPOINT; default: the controller's)")
	f.StringVar(&o.clusterCABundle, "cluster-ca-bundle", envDefault("CLUSTER_CA_BUNDLE", ""), "aws: base64 PEM of the cluster CA nodes trust (env CLUSTER_CA_BUNDLE)")
	f.StringVar(&o.region, "aws-region", envDefault("AWS_REGION", ""), "aws: region (env AWS_REGION; default: the SDK's configuration, us-east-1 with --aws-endpoint)")
	f.StringVar(&o.endpoint, "aws-endpoint", envDefault("AWS_ENDPOINT_URL", ""), "aws: send every AWS call to this loopback URL instead of AWS, e.g. the one nodewright fake-aws serves (env AWS_ENDPOINT_URL)")
	f.StringVar(&o.interruptionQueue, "interruption-queue", envDefault("INTERRUPTION_QUEUE", ""), "aws: SQS queue of spot interruption, rebalance, scheduled-change and instance state-change events (env INTERRUPTION_QUEUE; default: none)")
	f.StringVar(&o.kubernetesVersion, "kubernetes-version", envDefault("KUBERNETES_VERSION", ""), "aws: Kubernetes minor version AMI aliases resolve for (env KUBERNETES_VERSION; default: the API server's)")
}

// config builds the provider's configuration: the SDK's default chain
// (environment, shared files, instance role) against AWS, or anonymous
// calls to a loopback endpoint (the fake).
func (o *awsOptions) config(ctx context.Context) (operator.AWSConfig, error) {
	if o.clusterName == "" {
		return operator.AWSConfig{}, errors.New("--cluster-name: required with --cloud-provider aws")
	}
	out := operator.AWSConfig{ClusterName: o.clusterName, ClusterEndpoint: o.clusterEndpoint, ClusterCABundle: o.clusterCABundle, KubernetesVersion: o.kubernetesVersion, InterruptionQueue: o.interruptionQueue}
	if o.endpoint != "" {
		u, err := url.Parse(o.endpoint)
		if err != nil || u.Host == "" {
			return operator.AWSConfig{}, fmt.Errorf("--aws-endpoint %q: not a URL", o.endpoint)
		}
		if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return operator.AWSConfig{}, fmt.Errorf("--aws-endpoint %q: only loopback endpoints (a fake); leave it unset to call AWS", o.endpoint)
		}
		out.SDK = fake.Config(o.endpoint)
		if o.region != "" {
			out.SDK.Region = o.region
		}
		return out, nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	var opts []func(*awsconfig.LoadOptions) error
	if o.region != "" {
		opts = append(opts, awsconfig.WithRegion(o.region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return operator.AWSConfig{}, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return operator.AWSConfig{}, errors.New("--aws-region: no region configured (flag, AWS_REGION or the shared config)")
	}
	cfg.HTTPClient = transport.BufferedBodies(cfg.HTTPClient)
	out.SDK = cfg
	return out, nil
}
