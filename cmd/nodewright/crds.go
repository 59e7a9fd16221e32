package main

import (
	"bytes"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/api/crds"
)

func newCRDsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "crds",
		Short: "Print Nodewright's CustomResourceDefinitions",
		Long: `Print the CustomResourceDefinitions of NodePool, NodeClaim (karpenter.sh/v1),
EC2NodeClass (karpenter.k8s.aws/v1) and KWOKNodeClass (karpenter.kwok.sh/v1alpha1)
as one multi-document YAML stream, ready for:

  nodewright crds | kubectl apply --server-side -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			names, files, err := crds.Files()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, name := range names {
				doc := bytes.TrimPrefix(files[name], []byte("---\n"))
				if _, err := fmt.Fprintf(out, "---\n# Source: %s\n%s", name, doc); err != nil {
					return fmt.Errorf("writing CRD %s: %w", name, err)
				}
			}
			return nil
		},
	}
}
