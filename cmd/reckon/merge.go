package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/suites"
)

func init() { rootCmd.AddCommand(newMergeCmd()) }

func newMergeCmd() *cobra.Command {
	var opts suites.MergeOptions
	var quiet bool
	cmd := &cobra.Command{
		Use:   "merge [--out DIR] [--spec FILE] DIR...",
		Short: "Join the output directories of reckon gate --shard I/N into one verdict",
		Long: `merge reads the results.json of every shard of one spec (reckon gate --shard 1/N ... N/N,
each in its own output directory, e.g. the artifacts of a CI matrix) and writes one results.json,
junit.xml, summary.md and report.html to --out, prints the terminal report, and ends with one closing
line and exit code as reckon gate.

Every per-config check is judged again from the evidence the shards recorded, through the same
judges as a live run (reckon gate records, then judges); a shard's verdict is kept only where its
results cannot carry the evidence (equivalence, a probe file, a check against the history store).
Statistical checks are judged again over the whole run (one Holm-Bonferroni family, as an unsharded run). Cross-config checks whose configs ran on
different shards (--shard-by config) are judged here when those shards share a testbed key; across
different testbed keys they are refused (an error): throughput, memory and numerics of different
machines are never compared. Every shard 1..N must be given exactly once.

A shard's results are a claim, not instructions: merge refuses shards of another spec digest, of
different commits (--allow-mixed merges them red), with configs the spec does not assign them, or
with checks missing, repeated or unknown to the spec; it fails the merge when a shard's stated
outcome disagrees with the verdict its evidence gives. It never opens a path a shard names (log_path,
numerics_file): log tails come from the results, numerics only from SHARD/numerics/CONFIG.json.

Exit code: 0 green, 1 a check failed (or a shard was interrupted), 2 bad input (not shard outputs,
shards of different specs or commits, a shard missing, repeated or not matching the spec), 3
infrastructure errors only.`,
		Example: `  reckon merge --out out shard-1 shard-2 shard-3
  reckon merge --out out --spec .reckon/premerge.yaml artifacts/reckon-shard-*`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return withExitCode(2, errors.New("merge: expected the shards' output directories (reckon merge DIR...)"))
			}
			for _, d := range args {
				if abs, err := filepath.Abs(d); err == nil && opts.OutDir != "" {
					if out, err := filepath.Abs(opts.OutDir); err == nil && out == abs {
						return withExitCode(2, fmt.Errorf("merge: --out %s is also a shard directory; write the merged reports elsewhere", opts.OutDir))
					}
				}
			}
			opts.Dirs = args
			opts.Version = version
			opts.Log = logrus.StandardLogger()
			run, err := suites.Merge(opts)
			if err != nil && run == nil {
				if errors.Is(err, suites.ErrInvalidInput) {
					return withExitCode(2, err)
				}
				return withExitCode(3, err)
			}
			if !quiet {
				printTerminalReport(cmd.OutOrStdout(), run)
				fmt.Fprintln(cmd.OutOrStdout())
			}
			fmt.Fprintf(cmd.OutOrStdout(), "merged %d shards into %s (junit.xml, results.json, summary.md, report.html)\n", len(args), opts.OutDir)
			fmt.Fprintln(cmd.OutOrStdout(), closingLine(run))
			return runExit(run, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.OutDir, "out", "out", "directory for the merged reports")
	f.StringVar(&opts.SpecPath, "spec", "", "the spec the shards ran (default: the path they recorded)")
	f.StringVar(&opts.BaselineDir, "baselines", "baselines", "directory of stored baselines, for statistical checks against the baseline")
	f.BoolVar(&opts.Strict, "strict", false, "fail no_baseline and inconclusive checks (default: on when every shard ran with --strict)")
	f.BoolVar(&opts.RequireBaseline, "require-baseline", false, "fail statistical checks that have no stored baseline for their testbed (checks against: history with too few nights fail under --strict only)")
	f.BoolVar(&opts.AllowMixed, "allow-mixed", false, "merge shards of different commits (the merged run is red and says which ran which) instead of refusing them")
	f.BoolVar(&quiet, "quiet", false, "print only the report paths and the closing line, not the terminal report")
	return cmd
}
