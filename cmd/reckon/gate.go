package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/history"
	"github.com/reckon-ci/reckon/reporters"
	"github.com/reckon-ci/reckon/suites"
)

func init() { rootCmd.AddCommand(newGateCmd()) }

func newGateCmd() *cobra.Command {
	var opts suites.Options
	var quiet bool
	var commit, historyFlag string
	var historyReadOnly bool
	var shard, shardBy string
	var betweenCV string
	cmd := &cobra.Command{
		Use:   "gate --spec FILE [--label-filter EXPR] [--out DIR] [--require-baseline] [--strict] [--allow-partial]",
		Short: "Launch every config of a spec, measure it, judge every check, write the reports",
		Long: `gate runs a gate spec end to end: for each config it launches the engine once (in its own
process group, log in OUT/logs/CONFIG.log), checks what the engine actually did (effective allreduce,
KV cache, memory plan), runs the numerics probe and the throughput trials the checks need, then
judges the cross-config checks (equivalence, relative floors, statistical gates against another
config or the stored baseline of this testbed).

Reports go to OUT: junit.xml, results.json, summary.md (for $GITHUB_STEP_SUMMARY and PR comments)
and report.html. The terminal gets a plain-text report (colour only on a terminal; NO_COLOR turns it
off): the failures first with their reasons, then the checks that decided nothing with what would
decide them (trials or launches needed), then one row per config. The closing line states the
verdict and every count, e.g.
  FAIL: 12 passed, 1 failed, 0 errors, 1 inconclusive, 0 no baseline, 2 skipped, 0 not run

Exit code: 0 green (nothing failed or errored, something passed); 1 a check failed, or the run
was interrupted (--timeout, SIGINT, SIGTERM: every check not judged is listed as not run); 2 bad
input (spec, flags, a --label-filter that selects nothing or leaves out a selected check's
inputs); 3 infrastructure only (an engine did not start or crashed, reports could not be
written) with no check failed.

Select checks with --label-filter (Ginkgo syntax): labels are config names, the check kinds
health, memory, numerics and throughput, and the spec's tags, e.g. --label-filter 'premerge && !eagle3'.
A filter must also select what each selected cross-config check compares (the other config's
measurements); --allow-partial skips such checks instead, saying so. --strict (CI: nightly and
pre-merge) makes no_baseline, inconclusive and such skipped checks failures.

--shard I/N runs a stable part of the configs (a function of the spec alone, so every runner
computes the same partition): configs that a cross-config check ties together stay in one shard.
With --shard-by config every config is spread on its own, for runners of one testbed key; the
cross-config checks split over shards are then "deferred" and judged by reckon merge, which joins
the shards' output directories into one results.json, junit.xml, summary.md and report.html.`,
		Example: `  reckon gate --spec fixtures/specs/default.yaml --out out
  reckon gate --spec my-sglang.yaml --label-filter memory --out out
  reckon gate --spec nightly.yaml --require-baseline
  reckon gate --spec matrix.yaml --shard 2/4 --out out-2 && reckon merge --out out out-*`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.SpecPath == "" {
				return withExitCode(2, errors.New("--spec is required"))
			}
			if opts.Timeout < 0 {
				return withExitCode(2, fmt.Errorf("--timeout %s: expected a positive duration (e.g. 3h), or 0 for no bound", opts.Timeout))
			}
			if cmd.Flags().Changed("between-launch-cv") {
				cv, err := gate.ParseBetweenLaunchCV("--between-launch-cv", betweenCV)
				if err != nil {
					return withExitCode(2, err)
				}
				opts.BetweenLaunchCV = cv
			}
			if shard != "" {
				sh, err := suites.ParseShard(shard)
				if err != nil {
					return withExitCode(2, err)
				}
				switch shardBy {
				case suites.ShardByGroup, suites.ShardByConfig:
					sh.By = shardBy
				default:
					return withExitCode(2, fmt.Errorf("--shard-by %q: expected %s or %s", shardBy, suites.ShardByGroup, suites.ShardByConfig))
				}
				opts.Shard = sh
			} else if cmd.Flags().Changed("shard-by") {
				return withExitCode(2, errors.New("--shard-by needs --shard I/N"))
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
			opts.GitCommit, opts.GitCommitSource = resolveCommit(ctx, commit, ".")
			// History (cmd/reckon/history.go): checks against history read it; the run is
			// appended after the reports are written.
			dsn := historyDSN(historyFlag)
			if historyReadOnly && dsn == "" {
				return withExitCode(2, fmt.Errorf("--history-readonly needs a history store: pass --history DSN or set %s", history.EnvDSN))
			}
			if dsn != "" {
				if _, _, _, err := history.ParseDSN(dsn); err != nil {
					return withExitCode(2, err)
				}
				hs := &historySource{dsn: dsn}
				defer hs.close()
				opts.History = hs
			}
			start := time.Now()
			restoreStdout := func() {}
			if !opts.Verbose {
				restoreStdout = filterStdout()
			}
			run, err := suites.Run(ctx, opts)
			restoreStdout()
			if err != nil && run == nil {
				if errors.Is(err, suites.ErrInvalidInput) {
					return withExitCode(2, err)
				}
				return withExitCode(3, err)
			}
			if !quiet {
				fmt.Fprintln(cmd.OutOrStdout())
				printTerminalReport(cmd.OutOrStdout(), run)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "reports: %s (junit.xml, results.json, summary.md, report.html); %s to verdict\n", opts.OutDir, time.Since(start).Round(time.Second))
			if run.Shard != nil && len(run.Shard.Configs) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "EMPTY SHARD: --shard %d/%d holds no config of %s (more shards than groups of configs); reckon merge accepts its results.json\n", run.Shard.Index, run.Shard.Count, opts.SpecPath)
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), closingLine(run))
			if dsn != "" {
				if herr := recordInHistory(ctx, cmd, dsn, historyReadOnly, run, opts); herr != nil && err == nil && run.ExitCode() == 0 {
					return herr
				}
			}
			return runExit(run, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.SpecPath, "spec", "", "gate spec (YAML) to run (required)")
	f.StringVar(&opts.OutDir, "out", "out", "directory for engine logs, measurements and reports")
	f.StringVar(&opts.LabelFilter, "label-filter", "", "run only checks whose labels match this Ginkgo label expression")
	f.StringVar(&opts.BaselineDir, "baselines", "baselines", "directory of stored baselines (one folder per testbed)")
	f.BoolVar(&opts.RequireBaseline, "require-baseline", false, "fail statistical checks that have no stored baseline for this testbed (checks against: history with too few nights fail under --strict only)")
	f.BoolVar(&opts.Strict, "strict", false, "fail no_baseline and inconclusive checks, and checks skipped for a missing input (CI: nightly and pre-merge)")
	f.BoolVar(&opts.AllowPartial, "allow-partial", false, "skip (instead of refusing) checks whose inputs --label-filter leaves out")
	f.StringVar(&commit, "commit", "", "git commit of the code under test (default: $GITHUB_SHA, $BUILDKITE_COMMIT, $CI_COMMIT_SHA, else git rev-parse HEAD)")
	f.StringVar(&shard, "shard", "", "run shard I of N (I/N, 1-based) of the spec's configs; join the shards with reckon merge")
	f.StringVar(&shardBy, "shard-by", suites.ShardByGroup, "with --shard: group (configs tied by a cross-config check stay together) or config (every config alone; reckon merge judges the split checks, same testbed key only)")
	f.DurationVar(&opts.Timeout, "timeout", 0, "bound on the whole run; when it elapses the run is interrupted and red (0: only each step's own timeouts)")
	f.StringVar(&betweenCV, "between-launch-cv", "", "this testbed's between-launch CV prior, e.g. 5% or 0.05, for statistical checks that nothing measures it for (wins over $"+gate.BetweenLaunchEnv+"; default "+fmt.Sprintf("%g%%", 100*gate.DefaultBetweenLaunchCV)+")")
	f.BoolVarP(&opts.Verbose, "verbose", "v", false, "print every spec as it runs")
	f.BoolVar(&quiet, "quiet", false, "print only the report paths and the closing line, not the terminal report")
	f.StringVar(&historyFlag, "history", "", "results history (a file path, sqlite://PATH or postgres://...; default $RECKON_HISTORY): checks against: history are judged with it, every statistical check learns the testbed's between-launch variance from it, and the run is appended to it")
	f.BoolVar(&historyReadOnly, "history-readonly", false, "read the --history store only (judge with it, learn from it), append nothing: a pre-merge run of a PR, or a shard on a read-only copy")
	return cmd
}

// closingLine is the last line of a gate run: the verdict, the same as the summary's headline,
// and every count, e.g. "FAIL: 12 passed, 1 failed, 0 errors, 1 inconclusive, 0 no baseline,
// 2 skipped, 0 not run".
func closingLine(run *gate.Run) string {
	line := run.Verdict() + ": " + run.Count().String()
	if run.Interrupted && run.InterruptReason != "" {
		line += " (interrupted: " + run.InterruptReason + ")"
	}
	return line
}

// runExit is a finished run's exit: 3 when its reports could not be written (err), else its
// verdict's code (gate.Run.ExitCode).
func runExit(run *gate.Run, err error) error {
	if err != nil {
		return withExitCode(3, err)
	}
	if code := run.ExitCode(); code != 0 {
		return withExitCode(code, nil)
	}
	return nil
}

// printTerminalReport writes run's plain-text report to w (reporters.WriteTerminal), in colour
// when w is a terminal and NO_COLOR is not set.
func printTerminalReport(w io.Writer, run *gate.Run) {
	if err := reporters.WriteTerminal(w, run, reporters.TerminalOptions{Color: colorOutput(w)}); err != nil {
		logrus.WithError(err).Warn("terminal report")
	}
}

// colorOutput reports whether w is a terminal that should get colour: a TTY, NO_COLOR unset
// (https://no-color.org) and TERM not "dumb".
func colorOutput(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
