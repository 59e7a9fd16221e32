package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/manifest"
	"github.com/nodewright/nodewright/internal/plan"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/pkg/catalog"
)

func newPlanCommand() *cobra.Command {
	var (
		files       []string
		catalogFile string
		output      string
		minValues   string
	)
	cmd := &cobra.Command{
		Use:   "plan -f FILE_OR_DIR... [--catalog FILE] [-o text|json]",
		Short: "Dry run: show which nodes Nodewright would buy for the pending pods in the manifests",
		Long: `Reads Kubernetes manifests (NodePools, EC2NodeClasses or KWOKNodeClasses, Nodes as existing
capacity, Pods, and Deployments, ReplicaSets, StatefulSets and Jobs expanded to their pods, DaemonSets
as per-node overhead) and an instance-type catalog, runs the provisioning solver, and prints the
NodeClaims it would create, the pods it would place on existing nodes, and why any pod cannot be
placed. Nothing is contacted: no cluster, no cloud.

The default catalog is the embedded AWS-like us-east-1 catalog (1,345 types with on-demand list
prices and synthetic spot prices). --catalog takes Karpenter kwok instance-type JSON or the same
extended shape.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("no manifests: pass -f FILE_OR_DIR")
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: want text or json", output)
			}
			policy := sched.MinValuesPolicy(minValues)
			if policy != sched.MinValuesStrict && policy != sched.MinValuesBestEffort {
				return fmt.Errorf("--min-values-policy %q: want Strict or BestEffort", minValues)
			}
			set, err := manifest.Load(files...)
			if err != nil {
				return err
			}
			types, err := loadCatalog(catalogFile)
			if err != nil {
				return err
			}
			in, warnings := plan.Input(set, types)
			in.MinValuesPolicy = policy
			start := time.Now()
			result := sched.Solve(in)
			out := plan.NewOutput(result, time.Since(start).Seconds(), warnings)
			if output == "json" {
				return out.WriteJSON(cmd.OutOrStdout())
			}
			return out.WriteText(cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest file or directory (repeatable)")
	cmd.Flags().StringVar(&catalogFile, "catalog", "", "instance-type catalog JSON (default: the embedded AWS-like us-east-1 catalog)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&minValues, "min-values-policy", string(sched.MinValuesStrict), "Strict: a NodeClaim must meet minValues; BestEffort: relax minValues when the instance types cannot")
	return cmd
}

func loadCatalog(path string) ([]catalog.InstanceType, error) {
	if path == "" {
		return catalog.Default()
	}
	return catalog.LoadFile(path)
}
