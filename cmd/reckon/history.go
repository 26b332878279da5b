package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/history"
	"github.com/reckon-ci/reckon/internal/atomicfile"
	"github.com/reckon-ci/reckon/reporters"
	"github.com/reckon-ci/reckon/suites"
	"github.com/reckon-ci/reckon/workload"
)

func init() { rootCmd.AddCommand(newHistoryCmd()) }

// historyCallTimeout bounds each history command's database work.
const historyCallTimeout = 2 * time.Minute

// historyDSN is the --history flag, else $RECKON_HISTORY ("" when neither is set).
func historyDSN(flag string) string {
	if flag != "" {
		return flag
	}
	return strings.TrimSpace(os.Getenv(history.EnvDSN))
}

// openHistory opens the store for a command: a missing DSN is bad input (exit 2), an
// unreachable store an infrastructure error (exit 3).
func openHistory(ctx context.Context, flag string) (*history.Store, error) {
	dsn := historyDSN(flag)
	if dsn == "" {
		return nil, withExitCode(2, fmt.Errorf("no history store: pass --history DSN or set %s (a file path, sqlite://PATH, postgres://... or host=... dbname=...)", history.EnvDSN))
	}
	if _, _, _, err := history.ParseDSN(dsn); err != nil {
		return nil, withExitCode(2, err)
	}
	s, err := history.Open(ctx, dsn)
	if err != nil {
		return nil, withExitCode(3, err)
	}
	return s, nil
}

// isResultsFile reports whether data is a gate's results.json (this schema or the previous one,
// which gate.ReadResults still reads).
func isResultsFile(data []byte) bool {
	var head struct {
		Schema string `json:"schema"`
	}
	return json.Unmarshal(data, &head) == nil && (head.Schema == gate.ResultsSchema || head.Schema == gate.ResultsSchemaV1)
}

// importedResult is an imported result as history stores it: what its file says.
func importedResult(path string, res *workload.Result, idx int) history.Imported {
	md := res.Metadata
	return history.Imported{Path: path, Index: idx, Engine: md.Engine, Date: md.Date, Testbed: md.Testbed,
		Config: md.Config, Workload: md.Workload.Name, Commit: md.Labels["commit"], Metrics: res.Metrics()}
}

// appendGateRun appends a finished gate run to the history, then adds each statistical check's
// trend (its series' last runs) to results.json and report.html in outDir ("" : no rewrite). It
// is called after the reports are written; its error is an infrastructure error that leaves the
// run's files in place.
func appendGateRun(ctx context.Context, dsn string, run *gate.Run, specPath, outDir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, historyCallTimeout)
	defer cancel()
	s, err := history.Open(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer s.Close()
	id, added, err := s.Append(ctx, history.RowsFromRun(run, history.SpecHash(specPath)))
	if err != nil {
		return "", err
	}
	msg := fmt.Sprintf("history: appended run %d to %s", id, s.Where())
	if !added {
		msg = fmt.Sprintf("history: run already in %s (id %d)", s.Where(), id)
	}
	if outDir != "" {
		n, err := s.AddTrends(ctx, run)
		if err != nil {
			return "", err
		}
		if n > 0 {
			if err := atomicfile.Write(filepath.Join(outDir, "results.json"), func(w io.Writer) error { return gate.WriteResults(w, run) }); err != nil {
				return "", err
			}
			if err := atomicfile.Write(filepath.Join(outDir, "report.html"), func(w io.Writer) error { return reporters.WriteHTML(w, run) }); err != nil {
				return "", err
			}
		}
	}
	return msg, nil
}

// historySource serves `against: history` checks from a store opened on first use.
type historySource struct {
	dsn   string
	store *history.Store
	opts  history.Options
}

// Window implements suites.HistorySource.
func (h *historySource) Window(ctx context.Context, q suites.HistoryQuery) (*suites.HistoryWindow, error) {
	if h.store == nil {
		s, err := history.Open(ctx, h.dsn)
		if err != nil {
			return nil, err
		}
		h.store = s
	}
	w, err := h.store.HistoryWindow(ctx, history.SeriesKey{Testbed: q.Testbed, Spec: q.Spec, Config: q.Config, Workload: q.Workload, Metric: q.Metric},
		q.MinRuns, history.DefaultWindow, h.opts, q.Stat)
	var short *history.ErrShortWindow
	if errors.As(err, &short) {
		return nil, fmt.Errorf("%w: %v", suites.ErrNoHistory, err)
	}
	if err != nil {
		return nil, err
	}
	hw := &suites.HistoryWindow{Samples: w.Samples, Groups: w.Groups, GroupRun: w.GroupRun, OpenFrom: w.OpenFrom, Runs: w.Runs, Describe: w.Describe(), LastCommit: w.Last.Commit}
	if w.Open != nil {
		hw.Open = w.OpenSince()
		hw.OpenCommit = w.Open.Commit
	}
	return hw, nil
}

func (h *historySource) close() {
	if h != nil && h.store != nil {
		h.store.Close()
	}
}

func newHistoryCmd() *cobra.Command {
	var dsn string
	cmd := &cobra.Command{
		Use:   "history",
		Short: "The results history: append runs, find change points, trend pages, bisect help",
		Long: `history keeps every gate run (provenance, each config's engine report, every trial) in a store:
SQLite (a file path or sqlite://PATH) or PostgreSQL (postgres://...), from --history or $RECKON_HISTORY.
Over each series (testbed, spec, config, workload, metric) it finds change points with E-divisive
means and a t-test significance (docs/history.md).`,
	}
	cmd.PersistentFlags().StringVar(&dsn, "history", "", "results store: a file path, sqlite://PATH or postgres://... (default $RECKON_HISTORY)")
	cmd.AddCommand(newHistoryAddCmd(&dsn), newHistoryAnalyzeCmd(&dsn), newHistoryReportCmd(&dsn), newHistoryBetweenCmd(&dsn), newHistoryAcceptCmd(&dsn))
	return cmd
}

func newHistoryAddCmd(dsn *string) *cobra.Command {
	m := history.ImportMeta{ReckonVersion: version}
	cmd := &cobra.Command{
		Use:   "add FILE... [--commit SHA] [--time T] [--testbed K] [--spec S] [--config C] [--workload W]",
		Short: "Append a gate's results.json, or another tool's result files (one trial each)",
		Long: `add appends runs to the history. A results.json of reckon gate is stored whole (provenance,
engine reports, every trial); the same run added twice is stored once. Any file reckon import
reads (vLLM bench serve JSON/JSONL, SGLang bench_serving JSONL, AIPerf/GenAI-Perf, reckon bench)
becomes one run of one trial per result; --commit, --time, --testbed, --spec, --config and
--workload supply what the file does not say (flags win over the file).`,
		Example: `  reckon history add out/results.json --history history.db
  reckon history add archive/*.jsonl --spec nightly --testbed h100x8-nvlink --config nccl --workload c16 --commit abc123`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var runs []*history.Rows
			for _, path := range args {
				data, err := os.ReadFile(path)
				if err != nil {
					return withExitCode(2, err)
				}
				if isResultsFile(data) {
					r, err := gate.ReadResults(path)
					if err != nil {
						return withExitCode(2, err)
					}
					h := history.RowsFromRun(r, history.SpecHash(r.SpecPath))
					if m.Commit != "" {
						h.Run.GitCommit = m.Commit
					}
					if m.Testbed != "" {
						h.Run.TestbedKey = m.Testbed
					}
					if err := h.Validate(); err != nil {
						return withExitCode(2, fmt.Errorf("%s: %v", path, err))
					}
					runs = append(runs, h)
					continue
				}
				rs, err := workload.ImportAll(path)
				if err != nil {
					return withExitCode(2, err)
				}
				for i, res := range rs {
					h, err := history.RowsFromImport(importedResult(path, res, i), m)
					if err != nil {
						return withExitCode(2, err)
					}
					runs = append(runs, h)
				}
			}
			ctx, cancel := context.WithTimeout(cmdContext(cmd), historyCallTimeout)
			defer cancel()
			s, err := openHistory(ctx, *dsn)
			if err != nil {
				return err
			}
			defer s.Close()
			added := 0
			for _, r := range runs {
				id, ok, err := s.Append(ctx, r)
				if err != nil {
					return withExitCode(3, err)
				}
				if ok {
					added++
				}
				state := "appended"
				if !ok {
					state = "already stored"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s run %d: %s %s %s commit %s\n", state, id, r.Run.StartedAt.Format(time.RFC3339), r.Run.TestbedKey, r.Run.SpecName, shortSHA(r.Run.GitCommit))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d of %d runs appended to %s\n", added, len(runs), s.Where())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&m.Commit, "commit", "", "git commit the results are of")
	f.StringVar(&m.When, "time", "", "when the results were measured (RFC 3339 or 2006-01-02), for files without a date")
	f.StringVar(&m.Testbed, "testbed", "", "testbed key (see reckon doctor)")
	f.StringVar(&m.Spec, "spec", "", "spec name the series belongs to")
	f.StringVar(&m.Config, "config", "", "config name")
	f.StringVar(&m.Workload, "workload", "", "workload name")
	return cmd
}

// historyExit is a history command's exit for err: 3 for an unreachable store (infrastructure),
// 2 for anything else (bad input).
func historyExit(err error) error {
	if errors.Is(err, history.ErrUnavailable) {
		return withExitCode(3, err)
	}
	return withExitCode(2, err)
}

func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

func shortSHA(c string) string {
	if c == "" {
		return "?"
	}
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// analyzeFlags are the series filter and the detection options.
type analyzeFlags struct {
	f    history.Filter
	o    history.Options
	json bool
}

// seriesFilterFlags registers the flags that select series (testbed, spec, config, workload,
// metric) into f: the one definition analyze, report and accept share.
func seriesFilterFlags(fl *pflag.FlagSet, f *history.Filter) {
	fl.StringVar(&f.Testbed, "testbed", "", "only this testbed")
	fl.StringVar(&f.Spec, "spec", "", "only this spec")
	fl.StringVar(&f.Config, "config", "", "only this config")
	fl.StringVar(&f.Workload, "workload", "", "only this workload ('engine' for engine-report values)")
	fl.StringVar(&f.Metric, "metric", "", "only this metric (e.g. output_throughput, kv_cache_tokens)")
}

func (a *analyzeFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	seriesFilterFlags(fl, &a.f)
	fl.Float64Var(&a.o.PValue, "p-value", history.DefaultPValue, fmt.Sprintf("significance a change point must reach: as is in the newest %d runs and in series of one window, times window/n in longer ones", history.RecentRuns))
	fl.Float64Var(&a.o.Magnitude, "magnitude", 0, "smallest |forward change| that counts (0.02 = 2%)")
	fl.IntVar(&a.o.Window, "window", history.DefaultWindow, "sliding window of the first pass (points)")
	fl.BoolVar(&a.json, "json", false, "print JSON")
}

func (a *analyzeFlags) validate() error {
	if a.o.PValue <= 0 || a.o.PValue >= 1 {
		return withExitCode(2, fmt.Errorf("--p-value %g: expected a level in (0, 1)", a.o.PValue))
	}
	if a.o.Magnitude < 0 || a.o.Window < 6 {
		return withExitCode(2, fmt.Errorf("--magnitude %g / --window %d: expected a magnitude >= 0 and a window >= 6", a.o.Magnitude, a.o.Window))
	}
	return nil
}

func newHistoryAnalyzeCmd(dsn *string) *cobra.Command {
	var a analyzeFlags
	cmd := &cobra.Command{
		Use:   "analyze [--testbed K] [--spec S] [--config C] [--workload W] [--metric M] [--json]",
		Short: "Find the change points of every series",
		Long: fmt.Sprintf(`analyze runs E-divisive means with a Student t-test significance (defaults p <= %g, window %d)
over each series and prints each change point: its run, the commit range it falls in, the forward
change, mean and spread before and after, and p. The level is length-aware: a change point whose
newer side is the newest %d runs or fewer must reach --p-value, every other one --p-value x
window/n in a series of n > window runs, so a long stationary series does not split more often the
longer it grows (docs/history.md).`, history.DefaultPValue, history.DefaultWindow, history.RecentRuns),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ser, fs, err := a.run(cmd, *dsn)
			if err != nil {
				return err
			}
			return printFindings(cmd.OutOrStdout(), len(ser), fs, a.json)
		},
	}
	a.register(cmd)
	return cmd
}

// run validates the flags, opens the store and analyzes the series they select.
func (a *analyzeFlags) run(cmd *cobra.Command, dsn string) ([]history.Series, []history.Finding, error) {
	if err := a.validate(); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmdContext(cmd), historyCallTimeout)
	defer cancel()
	s, err := openHistory(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	ser, fs, err := s.Analyze(ctx, a.f, a.o)
	if err != nil {
		return nil, nil, withExitCode(3, err)
	}
	return ser, fs, nil
}

func printFindings(w io.Writer, nSeries int, fs []history.Finding, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if fs == nil {
			fs = []history.Finding{}
		}
		return enc.Encode(map[string]any{"series": nSeries, "change_points": fs})
	}
	for _, f := range fs {
		fmt.Fprintf(w, "%s/%s %s (run %d)\n", f.Series.Testbed, f.Series.Spec, f.Line(), f.RunID)
	}
	fmt.Fprintf(w, "%d change point(s) in %d series\n", len(fs), nSeries)
	return nil
}

func newHistoryReportCmd(dsn *string) *cobra.Command {
	var a analyzeFlags
	var out string
	var last int
	cmd := &cobra.Command{
		Use:   "report --out DIR [--last N] [filters]",
		Short: "Write a self-contained HTML trend page (and a Markdown summary) with change points",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ser, fs, err := a.run(cmd, *dsn)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return withExitCode(3, err)
			}
			page := filepath.Join(out, "history.html")
			if err := history.WritePages(out, ser, fs, last, time.Now()); err != nil {
				return withExitCode(3, err)
			}
			md := filepath.Join(out, "history.md")
			if err := atomicfile.Write(md, func(w io.Writer) error { return history.WriteSummary(w, len(ser), fs) }); err != nil {
				return withExitCode(3, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and %s: %d series, %d change point(s)\n", page, md, len(ser), len(fs))
			return nil
		},
	}
	a.register(cmd)
	cmd.Flags().StringVar(&out, "out", "out", "directory for history.html and history.md")
	cmd.Flags().IntVar(&last, "last", 60, "runs per chart (0: all)")
	return cmd
}

func newHistoryBetweenCmd(dsn *string) *cobra.Command {
	var a analyzeFlags
	cmd := &cobra.Command{
		Use:   "between COMMIT_A COMMIT_B [filters] [--json]",
		Short: "List the runs and change points between two commits (to point git bisect at the gate)",
		Example: `  reckon history between abc123 def456
  git bisect start def456 abc123 && git bisect run reckon gate --spec my.yaml --label-filter custom-ar`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.validate(); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmdContext(cmd), historyCallTimeout)
			defer cancel()
			s, err := openHistory(ctx, *dsn)
			if err != nil {
				return err
			}
			defer s.Close()
			runs, fs, err := s.Between(ctx, args[0], args[1], a.f, a.o)
			if err != nil {
				return historyExit(err)
			}
			w := cmd.OutOrStdout()
			if a.json {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if fs == nil {
					fs = []history.Finding{}
				}
				return enc.Encode(map[string]any{"runs": runs, "change_points": fs})
			}
			for _, r := range runs {
				fmt.Fprintf(w, "run %d  %s  %-12s  %s/%s  %s\n", r.ID, r.StartedAt.Format("2006-01-02 15:04"), shortSHA(r.GitCommit), r.TestbedKey, r.SpecName, r.Verdict)
			}
			for _, f := range fs {
				fmt.Fprintf(w, "change: %s\n", f.Line())
			}
			fmt.Fprintf(w, "%d run(s), %d change point(s) between %s and %s\n", len(runs), len(fs), args[0], args[1])
			return nil
		},
	}
	a.register(cmd)
	return cmd
}

// appendToHistory is the gate's history hook, run after the reports are written: it appends
// the run and prints where; an unreachable store is printed as an infrastructure error (the
// returned exit 3) that leaves the run's files in place. A shard's partial results are not
// appended: the merged results.json is (reckon history add).
// recordInHistory appends a finished gate run to the history, or says that it does not when
// the store is read only for this run (--history-readonly).
func recordInHistory(ctx context.Context, cmd *cobra.Command, dsn string, readOnly bool, run *gate.Run, opts suites.Options) error {
	if readOnly {
		fmt.Fprintln(cmd.OutOrStdout(), "history: read only (--history-readonly): this run is not appended")
		return nil
	}
	return appendToHistory(ctx, cmd, dsn, run, opts)
}

func appendToHistory(ctx context.Context, cmd *cobra.Command, dsn string, run *gate.Run, opts suites.Options) error {
	if run.Shard != nil {
		fmt.Fprintf(cmd.OutOrStdout(), "history: a shard's results are not appended; append the merged run: reckon history add MERGED/results.json\n")
		return nil
	}
	msg, err := appendGateRun(ctx, dsn, run, opts.SpecPath, opts.OutDir)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "history: INFRASTRUCTURE ERROR: %v\nhistory: the run is not in the history; its files are in %s; append it later with: reckon history add %s\n",
			err, opts.OutDir, filepath.Join(opts.OutDir, "results.json"))
		return withExitCode(3, nil)
	}
	fmt.Fprintln(cmd.OutOrStdout(), msg)
	return nil
}
