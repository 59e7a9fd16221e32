// Package crds embeds the CustomResourceDefinitions generated from the API
// types (NodePool, NodeClaim, EC2NodeClass, KWOKNodeClass), so that the binary
// can print and install them without the repository at hand.
package crds

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
)

//go:embed *.yaml
var files embed.FS

// Files returns the CRD manifests, keyed by file name, in a stable order.
func Files() ([]string, map[string][]byte, error) {
	entries, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, nil, fmt.Errorf("listing embedded CRDs: %w", err)
	}
	sort.Strings(entries)
	out := make(map[string][]byte, len(entries))
	for _, name := range entries {
		b, err := files.ReadFile(name)
		if err != nil {
			return nil, nil, fmt.Errorf("reading embedded CRD %s: %w", name, err)
		}
		out[name] = b
	}
	return entries, out, nil
}

// Manifests returns the CRD manifests in the order of Files.
func Manifests() ([][]byte, error) {
	names, files, err := Files()
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(names))
	for i, name := range names {
		out[i] = files[name]
	}
	return out, nil
}
