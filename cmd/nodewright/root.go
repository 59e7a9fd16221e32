package main

import (
	"io"

	"github.com/spf13/cobra"
)

// newRootCommand builds the command tree. Output goes to out and errOut so
// tests can capture it.
func newRootCommand(out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "nodewright",
		Short: "Nodewright buys and retires Kubernetes nodes for the pods that need them",
		Long: `Nodewright is a Kubernetes node autoscaler compatible with Karpenter v1:
it reads NodePool, NodeClaim and EC2NodeClass objects written for Karpenter and
launches, replaces and removes nodes to fit the pods that cannot be scheduled.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.AddCommand(newVersionCommand(), newCRDsCommand(), newPlanCommand(), newControllerCommand(), newSimulateCommand(), newExplainCommand(), newFakeAWSCommand(),
		newDocsCommand(func() *cobra.Command { return newRootCommand(io.Discard, io.Discard) }))
	return root
}
