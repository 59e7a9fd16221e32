package main

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodewright/nodewright/internal/controller/disruption"
	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/internal/simulator"
)

func newExplainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Say why Nodewright does (or does not) do something",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newExplainNodeCommand(), newExplainPodCommand())
	return cmd
}

func newExplainNodeCommand() *cobra.Command {
	var (
		kubeconfig, catalogFile string
		files                   []string
		at                      time.Duration
		seed                    int64
	)
	cmd := &cobra.Command{
		Use:   "node NAME [--kubeconfig FILE | --at DURATION [-f FILE_OR_DIR...]]",
		Short: "Say what disruption would do with a node now, and why",
		Long: `Runs every disruption method (emptiness, drift, consolidation) on the cluster as it is, without
acting, and says whether the node (or NodeClaim) NAME would go and how, or why it stays: a pod with
karpenter.sh/do-not-disrupt, a PodDisruptionBudget that allows no disruption, a budget spent, pods
that would have nowhere to go, no cheaper instance type, consolidateAfter not yet elapsed.

Against a live cluster it reads the objects of --kubeconfig (env KUBECONFIG; default: in-cluster)
once; instance types come from --catalog as for the controller. With --at it runs a simulation
instead (-f as for 'nodewright simulate', default the embedded quickstart) for that long and
explains the node at that moment; node names in a simulation are the same for the same seed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			var (
				e   disruption.Explanation
				err error
			)
			if cmd.Flags().Changed("at") || len(files) > 0 {
				if at <= 0 {
					return fmt.Errorf("--at %s: want a positive duration (how long to simulate before explaining)", at)
				}
				e, err = explainSimulated(ctx, simulation{files: files, catalogFile: catalogFile, seed: seed, policy: sched.MinValuesStrict, duration: at}, args[0])
			} else {
				e, err = explainLive(ctx, kubeconfig, catalogFile, args[0])
			}
			if err != nil {
				return err
			}
			return e.Write(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", envDefault("KUBECONFIG", ""), "kubeconfig file (env KUBECONFIG; default: in-cluster)")
	f.StringVar(&catalogFile, "catalog", envDefault("INSTANCE_TYPES_FILE_PATH", ""), "instance-type catalog (env INSTANCE_TYPES_FILE_PATH; default: the embedded AWS-like catalog)")
	f.StringArrayVarP(&files, "filename", "f", nil, "simulate this scenario or these manifests (implies --at)")
	f.DurationVar(&at, "at", 0, "simulate this long, then explain the node")
	f.Int64Var(&seed, "seed", 1, "seed of the simulation")
	return cmd
}

// explainLive asks a live cluster.
func explainLive(ctx context.Context, kubeconfig, catalogFile, name string) (disruption.Explanation, error) {
	types, err := loadCatalog(catalogFile)
	if err != nil {
		return disruption.Explanation{}, fmt.Errorf("--catalog %q: %w", catalogFile, err)
	}
	restConfig, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return disruption.Explanation{}, fmt.Errorf("--kubeconfig %q: loading the cluster configuration: %w", kubeconfig, err)
	}
	return operator.ExplainNode(ctx, restConfig, operator.Config{InstanceTypes: types, MinValuesPolicy: sched.MinValuesStrict}, name)
}

// explainSimulated runs the simulation to its end (the --at duration) and
// explains the node then.
func explainSimulated(ctx context.Context, run simulation, name string) (disruption.Explanation, error) {
	engine, err := run.engine(ctx)
	if err != nil {
		return disruption.Explanation{}, err
	}
	defer debug.SetGCPercent(debug.SetGCPercent(simulator.SimulateGCPercent))
	if _, err := engine.Run(ctx); err != nil {
		return disruption.Explanation{}, err
	}
	return engine.Explain(ctx, name)
}
