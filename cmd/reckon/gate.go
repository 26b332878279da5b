package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/suites"
)

func init() { rootCmd.AddCommand(newGateCmd()) }

func newGateCmd() *cobra.Command {
	var opts suites.Options
	var quiet bool
	cmd := &cobra.Command{
		Use:   "gate --spec FILE [--label-filter EXPR] [--out DIR] [--require-baseline]",
		Short: "Launch every config of a spec, measure it, judge every check, write the reports",
		Long: `gate runs a gate spec end to end: for each config it launches the engine once (in its own
process group, log in OUT/logs/CONFIG.log), checks what the engine actually did (effective allreduce,
KV cache, memory plan), runs the numerics probe and the throughput trials the checks need, then
judges the cross-config checks (equivalence, relative floors, statistical gates against another
config or the stored baseline of this testbed).

Reports go to OUT: junit.xml, results.json, summary.md (also printed) and report.html. Exit code:
0 when every check passed, 1 when any check failed or errored (the summary says why), 2 for bad
input (spec, flags), 3 when reports could not be written. SIGINT or SIGTERM stops every engine and
still writes the reports of what was measured (marked interrupted).

Select checks with --label-filter (Ginkgo syntax): labels are config names, the check kinds
health, memory, numerics and throughput, and the spec's tags, e.g. --label-filter 'premerge && !eagle3'.`,
		Example: `  reckon gate --spec fixtures/specs/default.yaml --out out
  reckon gate --spec my-sglang.yaml --label-filter memory --out out
  reckon gate --spec nightly.yaml --require-baseline`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.SpecPath == "" {
				return withExitCode(2, errors.New("--spec is required"))
			}
			opts.Version = version
			opts.Log = logrus.StandardLogger()
			// SIGINT/SIGTERM: Ginkgo interrupts the running spec and runs the cleanup nodes that
			// stop the engines, and the engine registry stops any engine still running; the
			// reports of what was measured are then written, marked interrupted.
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			start := time.Now()
			run, err := suites.Run(ctx, opts)
			if err != nil && run == nil {
				if errors.Is(err, suites.ErrInvalidInput) {
					return withExitCode(2, err)
				}
				return withExitCode(3, err)
			}
			summary, rerr := os.ReadFile(filepath.Join(opts.OutDir, "summary.md"))
			if rerr == nil && !quiet {
				fmt.Fprintln(cmd.OutOrStdout())
				fmt.Fprintln(cmd.OutOrStdout(), string(summary))
			}
			counts := run.Count()
			fmt.Fprintf(cmd.OutOrStdout(), "reports: %s (junit.xml, results.json, summary.md, report.html); %s to verdict\n", opts.OutDir, time.Since(start).Round(time.Second))
			fmt.Fprintf(cmd.OutOrStdout(), "%d passed, %d failed, %d skipped\n", counts.Passed, counts.Failed+counts.Errors, counts.Skipped)
			if err != nil {
				return withExitCode(3, err)
			}
			if !run.Green() {
				return withExitCode(1, nil)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.SpecPath, "spec", "", "gate spec (YAML) to run (required)")
	f.StringVar(&opts.OutDir, "out", "out", "directory for engine logs, measurements and reports")
	f.StringVar(&opts.LabelFilter, "label-filter", "", "run only checks whose labels match this Ginkgo label expression")
	f.StringVar(&opts.BaselineDir, "baselines", "baselines", "directory of stored baselines (one folder per testbed)")
	f.BoolVar(&opts.RequireBaseline, "require-baseline", false, "fail statistical checks that have no stored baseline for this testbed")
	f.DurationVar(&opts.Timeout, "timeout", 0, "bound on the whole run (0: only each step's own timeouts)")
	f.BoolVarP(&opts.Verbose, "verbose", "v", false, "print every spec as it runs")
	f.BoolVar(&quiet, "quiet", false, "do not print the Markdown summary")
	return cmd
}
