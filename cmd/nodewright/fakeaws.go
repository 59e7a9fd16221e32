package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodewright/nodewright/providers/aws/fake"
)

// fakeAWSFaults are the faults `nodewright fake-aws` injects.
type fakeAWSFaults struct {
	// loseLaunches is the rate of CreateFleet calls carried out whose
	// answers are lost.
	loseLaunches float64
	// describeLag hides new instances from DescribeInstances this long.
	describeLag time.Duration
	seed        uint64
}

// apply sets the faults on server, or says which flag is wrong.
func (f fakeAWSFaults) apply(server *fake.Server) error {
	if !(f.loseLaunches >= 0 && f.loseLaunches <= 1) {
		return fmt.Errorf("--lose-launch-responses %v: a rate within [0, 1]", f.loseLaunches)
	}
	if f.describeLag < 0 {
		return fmt.Errorf("--describe-lag %s: must not be negative", f.describeLag)
	}
	server.LoseResponses("CreateFleet", f.loseLaunches, rand.New(rand.NewPCG(f.seed, 0)))
	server.SetDescribeLag(f.describeLag)
	return nil
}

func newFakeAWSCommand() *cobra.Command {
	var listen, clusterName, catalogFile, kubeconfig string
	var bootDelay time.Duration
	var faults fakeAWSFaults
	cmd := &cobra.Command{
		Use:   "fake-aws --cluster-name NAME [--listen 127.0.0.1:PORT]",
		Short: "Serve a fake AWS on loopback for local runs and tests",
		Long: `Serves, on a loopback address, the AWS calls Nodewright's AWS provider makes (EC2, SSM), answered
from the instance catalog and a simulated account: a VPC with a subnet in each of us-east-1a/b/c and a
security group tagged karpenter.sh/discovery=NAME, the role KarpenterNodeRole-NAME with an instance
profile, and current AL2023 and Bottlerocket AMIs (amd64 and arm64, standard and NVIDIA) published
under their SSM alias parameters. Point an SDK at it with its endpoint URL. Nothing leaves the machine.

With --kubeconfig the fake's instances also join that cluster: each running instance registers
a Node (the labels and taints its user data asks for, its type's capacity) after --boot-delay,
turns Ready and runs its pods (an emulated kubelet), and the Node of a terminated instance is
deleted.

Faults for resilience tests: --lose-launch-responses RATE carries out that share of CreateFleet
calls (the instances launch) and then drops the connection, SDK retries included, so the caller
cannot tell whether it launched; --describe-lag D keeps new instances out of DescribeInstances for
D, as EC2's eventual consistency does; --seed makes the lost calls the same from run to run.
CreateFleet honours client tokens as EC2 does (a repeated call gets the first answer).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if clusterName == "" {
				return errors.New("--cluster-name: required (the karpenter.sh/discovery tag value)")
			}
			types, err := loadCatalog(catalogFile)
			if err != nil {
				return fmt.Errorf("--catalog %q: %w", catalogFile, err)
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = ctrl.SetupSignalHandler()
			}
			server, err := fake.New(fake.Options{InstanceTypes: types, World: fake.DefaultWorld(clusterName)})
			if err != nil {
				return err
			}
			if err := faults.apply(server); err != nil {
				return err
			}
			if kubeconfig != "" {
				restConfig, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
					&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
				if err != nil {
					return fmt.Errorf("--kubeconfig %q: %w", kubeconfig, err)
				}
				errs := make(chan error, 1)
				go func() { errs <- server.Join(ctx, restConfig, bootDelay) }()
				defer func() { <-errs }()
			}
			return serveFakeAWS(ctx, listen, server, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:4566", "loopback address to serve on (port 0: any free port)")
	cmd.Flags().StringVar(&clusterName, "cluster-name", "", "cluster name the fake account's resources are tagged for")
	cmd.Flags().StringVar(&catalogFile, "catalog", "", "instance-type catalog (default: the embedded AWS-like us-east-1 catalog)")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "cluster the fake's instances join as Nodes (default: none)")
	cmd.Flags().DurationVar(&bootDelay, "boot-delay", 2*time.Second, "how long an instance takes to register its Node (with --kubeconfig)")
	cmd.Flags().Float64Var(&faults.loseLaunches, "lose-launch-responses", 0, "share of CreateFleet calls carried out whose answers are then lost (0 to 1)")
	cmd.Flags().DurationVar(&faults.describeLag, "describe-lag", 0, "how long a new instance stays unknown to DescribeInstances")
	cmd.Flags().Uint64Var(&faults.seed, "seed", 1, "seed of the injected faults")
	return cmd
}

// serveFakeAWS serves a fake on listen until ctx ends, after printing its
// endpoint on out.
func serveFakeAWS(ctx context.Context, listen string, server *fake.Server, out io.Writer) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--listen %q: only loopback addresses (127.0.0.1, ::1, localhost): the fake must not be reachable from elsewhere", listen)
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	fmt.Fprintf(out, "fake AWS serving at http://%s (region us-east-1)\n", l.Addr())
	srv := &http.Server{Handler: server, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
