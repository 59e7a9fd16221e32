package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodewright/nodewright/internal/operator"
	"github.com/nodewright/nodewright/internal/sched"
)

func newExplainPodCommand() *cobra.Command {
	var kubeconfig, catalogFile string
	cmd := &cobra.Command{
		Use:   "pod NAMESPACE/NAME [--kubeconfig FILE]",
		Short: "Say why a pod is pending, and what each NodePool would do for it",
		Long: `Reads the cluster of --kubeconfig (env KUBECONFIG; default: in-cluster) once and says where the
pod stands: bound to a node; not yet marked unschedulable by kube-scheduler (Nodewright
provisions for those, and for pods kube-scheduler has not looked at 2s after their creation)
or held by scheduling gates; placed by Nodewright's plan on a node or a
NodeClaim that is launching; or the NodeClaim Nodewright would launch for it (NodePool, instance
type, zone, capacity type, price); or, when no NodePool can, each NodePool's reason: not Ready
(its NodeClass), a taint the pod does not tolerate, requirements it cannot meet, limits reached, no
instance type large enough. It solves as the provisioner does and creates nothing. Its last events
are listed too. Instance types come from --catalog as for the controller.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			namespace, name, ok := strings.Cut(args[0], "/")
			if !ok || namespace == "" || name == "" {
				return fmt.Errorf("pod %q: want NAMESPACE/NAME", args[0])
			}
			types, err := loadCatalog(catalogFile)
			if err != nil {
				return fmt.Errorf("--catalog %q: %w", catalogFile, err)
			}
			restConfig, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
				&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				return fmt.Errorf("--kubeconfig %q: loading the cluster configuration: %w", kubeconfig, err)
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			e, err := operator.ExplainPod(ctx, restConfig, operator.Config{InstanceTypes: types, MinValuesPolicy: sched.MinValuesStrict}, namespace, name)
			if err != nil {
				return err
			}
			return e.Write(cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", envDefault("KUBECONFIG", ""), "kubeconfig file (env KUBECONFIG; default: in-cluster)")
	cmd.Flags().StringVar(&catalogFile, "catalog", envDefault("INSTANCE_TYPES_FILE_PATH", ""), "instance-type catalog (env INSTANCE_TYPES_FILE_PATH; default: the embedded AWS-like catalog)")
	return cmd
}
