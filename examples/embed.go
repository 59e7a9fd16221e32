// Package examples holds the scenarios shipped with Nodewright; the
// quickstart is embedded so `nodewright simulate` runs it with no files.
package examples

import "embed"

// FS holds every example directory.
//
//go:embed quickstart seed daily chaos chaos-aws
var FS embed.FS

// Quickstart is the scenario `nodewright simulate` runs without arguments.
const Quickstart = "quickstart/scenario.yaml"

// Chaos is the mixed day the chaos runs play (`make chaos`, the chaos
// test): every fault kind on top of scale-ups and downs, drift, expiry,
// consolidation and interruptions.
const Chaos = "chaos/scenario.yaml"

// ChaosAWS is the chaos example on an EC2NodeClass, for the AWS provider
// against the simulator's fake AWS (`--cloud-provider aws`); the chaos runs
// play one seed in four with it.
const ChaosAWS = "chaos-aws/scenario.yaml"
