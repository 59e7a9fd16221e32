// Command nodewright is the Nodewright node autoscaler: a Karpenter-compatible
// controller, its dry-run planner and its offline simulator, in one binary.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand(os.Stdout, os.Stderr).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
