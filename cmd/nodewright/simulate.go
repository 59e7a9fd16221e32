package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodewright/nodewright/examples"
	"github.com/nodewright/nodewright/internal/sched"
	"github.com/nodewright/nodewright/internal/simulator"
)

func newSimulateCommand() *cobra.Command {
	var (
		files                      []string
		catalogFile                string
		cloudProvider, clusterName string
		output                     string
		duration                   time.Duration
		seed                       int64
		quiet                      bool
		minValues                  string
		reportFile                 string
		chaosSeed                  int64
	)
	cmd := &cobra.Command{
		Use:   "simulate [-f FILE_OR_DIR...] [--catalog FILE] [--duration D] [--seed N | --chaos SEED] [-o text|json]",
		Short: "Run Nodewright's controllers on a simulated cluster and cloud, on a virtual clock",
		Long: `Runs the same controllers as 'nodewright controller' against an in-process cluster (an in-memory
API, an emulated kube-scheduler and kubelet, Deployment/ReplicaSet/StatefulSet/Job controllers) and the
kwok provider, on a virtual clock that jumps from one event to the next, so hours of cluster life take
seconds. No cluster and no cloud are contacted.

-f takes plain manifests (everything is applied at the start) and at most one scenario file
(kind: Scenario) that adds timed steps; see docs/simulate.md. NodePools naming an EC2NodeClass launch
simulated instances from the catalog too. Without -f it runs the embedded quickstart
(examples/quickstart).

It prints a progress line on stderr while it runs, then the timeline of decisions and a summary on
stdout; -o json writes the whole report as JSON instead (byte-identical for the same inputs and seed).
--report FILE also writes one self-contained HTML page with SVG charts (nodes and $/h by NodePool and
capacity type, pending pods, CPU and memory utilisation) and the timeline.

A scenario's faults block injects faults (API write errors and conflicts, controller crashes and
restarts, cloud errors, node failures, spot interruptions) drawn from the seed. --chaos SEED runs
with seed SEED and every fault kind on, at the defaults for the kinds the scenario does not name;
the report then counts the faults injected by kind.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: want text or json", output)
			}
			policy := sched.MinValuesPolicy(minValues)
			if policy != sched.MinValuesStrict && policy != sched.MinValuesBestEffort {
				return fmt.Errorf("--min-values-policy %q: want Strict or BestEffort", minValues)
			}
			if cmd.Flags().Changed("duration") && duration <= 0 {
				return fmt.Errorf("--duration %s: want a positive duration", duration)
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if cloudProvider != "kwok" && cloudProvider != "aws" {
				return fmt.Errorf("--cloud-provider %q: want kwok or aws", cloudProvider)
			}
			run := simulation{files: files, catalogFile: catalogFile, seed: seed, policy: policy, cloudProvider: cloudProvider, clusterName: clusterName}
			if cmd.Flags().Changed("chaos") {
				if cmd.Flags().Changed("seed") {
					return fmt.Errorf("--chaos %d: give the seed once (--chaos SEED is --seed SEED with every fault on)", chaosSeed)
				}
				run.seed, run.chaos = chaosSeed, true
			}
			if cmd.Flags().Changed("duration") {
				run.duration = duration
			}
			if !quiet {
				run.progress = progressPrinter(cmd.ErrOrStderr())
			}
			run.replay = replayCommand(cmd.Flags())
			engine, err := run.engine(ctx)
			if err != nil {
				return err
			}
			defer debug.SetGCPercent(debug.SetGCPercent(simulator.SimulateGCPercent))
			start := time.Now()
			report, err := engine.Run(ctx)
			if err != nil {
				return err
			}
			took := time.Since(start)
			if reportFile != "" {
				if err := writeHTMLReport(reportFile, report); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				if err := report.WriteJSON(out); err != nil {
					return err
				}
				return violationsError(report)
			}
			if err := report.WriteTimeline(out); err != nil {
				return err
			}
			fmt.Fprintln(out)
			if err := report.WriteSummary(out, took); err != nil {
				return err
			}
			return violationsError(report)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "scenario or manifest file or directory (repeatable); default: the embedded quickstart")
	cmd.Flags().StringVar(&catalogFile, "catalog", "", "instance-type catalog JSON (default: the embedded AWS-like us-east-1 catalog)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text (timeline and summary) or json (the whole report)")
	cmd.Flags().DurationVar(&duration, "duration", 0, "simulated time to run (default: the scenario's, else 1h)")
	cmd.Flags().Int64Var(&seed, "seed", 1, "seed for every random choice; the same inputs and seed give the same report")
	cmd.Flags().Int64Var(&chaosSeed, "chaos", 0, "run with this seed and every fault kind on (the scenario's faults block, defaults for the kinds it leaves out); see docs/simulate.md")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress line on stderr")
	cmd.Flags().StringVar(&reportFile, "report", "", "also write a self-contained HTML report with charts to this file")
	cmd.Flags().StringVar(&cloudProvider, "cloud-provider", "kwok", "kwok (fast: the kwok provider plays every NodeClass) or aws (the AWS provider and EC2NodeClass controller against an in-process fake AWS)")
	cmd.Flags().StringVar(&clusterName, "cluster-name", "demo", "with --cloud-provider aws: the cluster the fake AWS's subnets and security group are tagged for (karpenter.sh/discovery)")
	cmd.Flags().StringVar(&minValues, "min-values-policy", string(sched.MinValuesStrict), "Strict or BestEffort, as for the controller")
	return cmd
}

// simulation is what a simulated run starts from.
type simulation struct {
	files       []string // none: the embedded quickstart
	catalogFile string
	seed        int64
	policy      sched.MinValuesPolicy
	duration    time.Duration // 0: the scenario's
	progress    func(simulator.Progress)
	// cloudProvider and clusterName pick the provider (kwok, or aws against
	// an in-process fake AWS whose discovery tags name clusterName).
	cloudProvider, clusterName string
	// chaos turns every fault kind on (defaults for those the scenario
	// does not name).
	chaos bool
	// replay is the command line that replays the run, for violations.
	replay string
}

// engine loads the inputs into an engine ready to run.
func (s simulation) engine(ctx context.Context) (*simulator.Engine, error) {
	var in *simulator.Input
	var err error
	if len(s.files) == 0 {
		in, err = simulator.LoadFS(examples.FS, examples.Quickstart)
	} else {
		in, err = simulator.Load(s.files...)
	}
	if err != nil {
		return nil, err
	}
	types, err := loadCatalog(s.catalogFile)
	if err != nil {
		return nil, err
	}
	if types, err = in.Catalog(types); err != nil {
		return nil, err
	}
	opts := simulator.Options{InstanceTypes: types, Seed: s.seed, MinValuesPolicy: s.policy, Progress: s.progress,
		CloudProvider: s.cloudProvider, ClusterName: s.clusterName, Faults: in.Scenario.Spec.Faults, Replay: s.replay}
	if s.chaos {
		opts.Faults = opts.Faults.WithDefaults(simulator.ChaosFaults())
	}
	if d := in.Scenario.Spec.Duration; d != nil {
		opts.Duration = time.Duration(*d)
	}
	if b := in.Scenario.Spec.BootDelay; b != nil {
		opts.BootDelay = time.Duration(*b)
	}
	if s.duration > 0 {
		opts.Duration = s.duration
	}
	engine, err := simulator.New(opts)
	if err != nil {
		return nil, err
	}
	if err := engine.Load(ctx, in); err != nil {
		return nil, err
	}
	return engine, nil
}

// violationsError makes the command fail when an invariant was broken
// (the report, written already, has each violation's time line).
func violationsError(r *simulator.Report) error {
	if len(r.Violations) == 0 {
		return nil
	}
	v := r.Violations[0]
	return fmt.Errorf("%d invariant violation(s); the first, %s at %s: %s; replay with: %s",
		len(r.Violations), v.Invariant, time.Duration(v.At), v.Message, v.Replay)
}

// replayCommand is the command line that runs the same simulation again:
// the flags given that shape the run (not output, report file or progress),
// and the seed.
func replayCommand(flags *pflag.FlagSet) string {
	words := []string{"nodewright", "simulate"}
	seeded := false
	flags.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "output", "report", "quiet":
			return
		case "seed", "chaos":
			seeded = true
		}
		values := []string{f.Value.String()}
		if a, ok := f.Value.(pflag.SliceValue); ok {
			values = a.GetSlice()
		}
		for _, v := range values {
			words = append(words, "--"+f.Name, shellQuote(v))
		}
	})
	if !seeded {
		words = append(words, "--seed", flags.Lookup("seed").Value.String())
	}
	return strings.Join(words, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,@+-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func writeHTMLReport(path string, report *simulator.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	if err := report.WriteHTML(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("--report %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--report %s: %w", path, err)
	}
	return nil
}

// progressPrinter writes a progress line at most every half second of
// wall time, and the last one.
func progressPrinter(w io.Writer) func(simulator.Progress) {
	var last time.Time
	return func(p simulator.Progress) {
		if now := time.Now(); now.Sub(last) >= 500*time.Millisecond || p.Elapsed >= p.Total {
			last = now
			fmt.Fprintln(w, p.String())
		}
	}
}
