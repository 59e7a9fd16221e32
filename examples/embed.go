// Package examples holds the scenarios shipped with Nodewright; the
// quickstart is embedded so `nodewright simulate` runs it with no files.
package examples

import "embed"

// FS holds every example directory.
//
//go:embed quickstart seed daily
var FS embed.FS

// Quickstart is the scenario `nodewright simulate` runs without arguments.
const Quickstart = "quickstart/scenario.yaml"
