package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/workload"
)

func init() { rootCmd.AddCommand(newCompareCmd()) }

// defaultGated are the metrics whose regressions decide compare's exit code unless --gate says
// otherwise. Holm-Bonferroni runs over these only: correcting over every printed metric would
// cost all the power.
var defaultGated = []string{"output_throughput", "median_ttft_ms", "median_tpot_ms"}

type compareOptions struct {
	base, head []string
	// baseVersion and headVersion are --base-tool-version / --head-tool-version.
	baseVersion, headVersion string
	json                     bool
	alpha                    float64
	minEffect                float64
	gate                     string
	twoSided                 bool
	strict                   bool
	// baseConfig, headConfig and workload pick the trials of a reckon results.json; betweenCV
	// is --between-launch-cv (compare_launch.go).
	baseConfig, headConfig, workload, betweenCV string
}

func newCompareCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "compare --base FILE... --head FILE... [flags]",
		Short: "Compare benchmark trials of two versions or configs, benchstat-style, with a verdict per metric",
		Long: `compare reads trial result files for a base and a head (in any format reckon import reads:
vLLM bench serve --save-result JSON, SGLang bench_serving JSONL, AIPerf / GenAI-Perf aggregates,
reckon's own result JSON; a file with several results gives one trial per result) and prints per
metric the medians, the ratio head/base with its confidence interval, the p-value and a verdict:
regression, improvement, no_change or inconclusive (with how many more trials per side would
likely decide).

A regression needs a one-sided t-test on log values at --alpha, a Mann-Whitney U rank test at
0.05, and a median change of at least --min-effect in the bad direction (each metric's direction
is known: throughput higher is better, latency lower is better). --min-effect takes a percentage
(5%) or a fraction below 1 (0.05), as the spec's min_effect. --two-sided tests both directions
at alpha/2 each. The metrics listed in --gate (default output_throughput, median_ttft_ms,
median_tpot_ms; "all" for every metric with a known direction) are Holm-Bonferroni corrected
together, get the verdicts regression / improvement, and decide the exit code; the others are
printed for information, with a significant change shown as worse / better (correcting over
every printed metric would cost all the power; see docs/statistics.md).

A metric that some trial of either side lacks (the source did not report it) is not compared,
and a note names it. When the two sides' workloads differ (model, concurrency, request rate,
input or output lengths, dataset, ignore_eos, temperature) a warning names the difference;
--strict makes it an error. Dataset names are normalised across tools first (reckon's synthetic
prompts, vLLM's and SGLang's random are "random"; sharegpt), lengths are compared as the
intervals each tool drew them from (SGLang's range ratio converted with its definition). A
setting one side's files do not record is printed as unknown, in a note, never as 0 and never
as a difference. When the two sides were measured with different definitions (token counting
source, ITL chunking, E2E end point, peak concurrency: see docs/metrics.md), a note names each
difference and the metrics it touches.

Launches as the unit: when both sides are reckon results.json files (a gate run's; the config by
--base-config / --head-config when a file has several, the workload by --workload), every trial
carries its launch and compare judges each metric as the gate does (gate.CompareLaunches: launch
means as the replicates, the between-launch CV measured in the launches or, with one launch per
side, the prior of --between-launch-cv / $RECKON_BETWEEN_LAUNCH_CV / 3%). Other files carry no
launch: each trial then counts as a replicate, and a line under the table says which unit was used.

Exit code: 0 no gated regression, 1 a gated regression, 2 bad input.`,
		Example: `  reckon compare --base main/run*.json --head pr/run*.json
  reckon compare --base a1.json a2.json a3.json --head b1.json b2.json b3.json --json
  reckon compare --base=a1.json,a2.json --head=b1.json,b2.json --min-effect 5% --gate all
  reckon compare --base out/results.json --base-config nccl --head out/results.json --head-config custom-ar`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, help, err := parseCompareArgs(cmd.Flags(), args)
			if help {
				return cmd.Help()
			}
			if err != nil {
				return withExitCode(2, err)
			}
			return runCompare(cmd.OutOrStdout(), cmd.ErrOrStderr(), opts)
		},
	}
	defineCompareFlags(cmd.Flags(), &compareOptions{})
	return cmd
}

type compareRow struct {
	Metric     string   `json:"metric"`
	Direction  string   `json:"direction"`
	BaseMedian *float64 `json:"base_median"`
	HeadMedian *float64 `json:"head_median"`
	Ratio      *float64 `json:"ratio"`
	CILow      *float64 `json:"ci_low"`
	CIHigh     *float64 `json:"ci_high"`
	PValue     *float64 `json:"p_value"`
	Verdict    string   `json:"verdict"`
	Gated      bool     `json:"gated"`
	NBase      int      `json:"n_base"`
	NHead      int      `json:"n_head"`
	Reason     string   `json:"reason"`
	MoreTrials int      `json:"more_trials,omitempty"`
	// Unit is the replicate: "launch" (reckon results.json on both sides) or "trial";
	// LaunchesBase/LaunchesHead count the launches, Decide says what design would decide.
	Unit         string `json:"unit"`
	LaunchesBase int    `json:"launches_base,omitempty"`
	LaunchesHead int    `json:"launches_head,omitempty"`
	Decide       string `json:"decide,omitempty"`
}

func numPtr(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

func runCompare(w, errw io.Writer, o compareOptions) error {
	prior, err := comparePrior(o.betweenCV)
	if err != nil {
		return withExitCode(2, err)
	}
	baseSet, err := loadSide(o.base, workload.ImportOptions{ToolVersion: o.baseVersion}, o.baseConfig, o.workload)
	if err != nil {
		return withExitCode(2, fmt.Errorf("--base: %w", err))
	}
	headSet, err := loadSide(o.head, workload.ImportOptions{ToolVersion: o.headVersion}, o.headConfig, o.workload)
	if err != nil {
		return withExitCode(2, fmt.Errorf("--head: %w", err))
	}
	diffs, unrecorded := workloadDiffs(baseSet, headSet)
	if len(diffs) > 0 {
		msg := "the base and head workloads differ: " + strings.Join(diffs, "; ")
		if o.strict {
			return withExitCode(2, errors.New(msg+" (--strict)"))
		}
		fmt.Fprintf(errw, "reckon compare: warning: %s\n", msg)
	}
	if len(unrecorded) > 0 {
		fmt.Fprintf(errw, "reckon compare: not recorded, so not checked: %s\n", strings.Join(unrecorded, "; "))
	}
	semantics := sideSemantics(baseSet, headSet)
	for _, n := range semantics.notes {
		fmt.Fprintf(errw, "reckon compare: %s\n", n)
	}
	base, head := baseSet.metrics, headSet.metrics
	if skipped := partialMetrics(base, head); len(skipped) > 0 {
		fmt.Fprintf(errw, "reckon compare: not compared (absent from some trial of a side, never taken as 0): %s\n", strings.Join(skipped, ", "))
	}
	gated := map[string]bool{}
	gateAll := strings.TrimSpace(o.gate) == "all"
	for _, g := range strings.Split(o.gate, ",") {
		if g = strings.TrimSpace(g); g != "" && g != "all" {
			if _, ok := gate.MetricFor(g); !ok {
				return withExitCode(2, fmt.Errorf("--gate: metric %q has no known direction", g))
			}
			gated[g] = true
		}
	}
	opts := gate.DefaultStatOptions()
	opts.Alpha, opts.MinEffect, opts.TwoSided = o.alpha, o.minEffect, o.twoSided
	if o.minEffect == 0 {
		opts.MinEffect = 1e-12
	}
	names := commonMetrics(base, head)
	if len(names) == 0 {
		return withExitCode(2, errors.New("the base and head trials share no metric with a known direction"))
	}
	byLaunch := baseSet.byLaunch() && headSet.byLaunch()
	results := make([]*gate.StatResult, len(names))
	var family []*gate.StatResult
	isGated := make([]bool, len(names))
	for i, name := range names {
		m, _ := gate.MetricFor(name)
		var r gate.StatResult
		if byLaunch {
			r = gate.CompareLaunches(baseSet.launchGroups(name), headSet.launchGroups(name), m, opts, prior)
		} else {
			r = gate.Compare(column(base, name), column(head, name), m, opts)
		}
		results[i] = &r
		isGated[i] = gateAll || gated[name]
		if isGated[i] {
			family = append(family, &r)
		}
	}
	for g := range gated {
		if !contains(names, g) {
			fmt.Fprintf(errw, "reckon compare: gated metric %s is not in every trial file; not judged\n", g)
		}
	}
	gate.Holm(family, o.alpha)
	rows := make([]compareRow, len(names))
	regressions := 0
	for i, r := range results {
		rows[i] = compareRow{Metric: r.Metric, Direction: string(r.Direction), BaseMedian: numPtr(r.BaseMedian), HeadMedian: numPtr(r.HeadMedian),
			Ratio: numPtr(r.Ratio), CILow: numPtr(r.CILow), CIHigh: numPtr(r.CIHigh), PValue: numPtr(r.PValue), Verdict: rowVerdict(r, isGated[i]),
			Gated: isGated[i], NBase: r.NBase, NHead: r.NHead, Reason: r.Reason, MoreTrials: r.MoreTrials, Unit: "trial"}
		if r.Launch != nil {
			rows[i].Unit, rows[i].LaunchesBase, rows[i].LaunchesHead, rows[i].Decide = "launch", r.Launch.LaunchesBase, r.Launch.LaunchesHead, r.Launch.Decide
		}
		if isGated[i] && r.Outcome == gate.Regression {
			regressions++
		}
	}
	if o.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		doc := map[string]any{"metrics": rows, "regressions": regressions, "workload_differences": nonNil(diffs),
			"not_recorded": nonNil(unrecorded), "definition_differences": nonNil(semantics.diffs), "semantics": semantics.sides}
		if err := enc.Encode(doc); err != nil {
			return withExitCode(3, err)
		}
	} else {
		printCompareTable(w, results, isGated, len(base), len(head), o)
		if note := compareUnitNote(baseSet, headSet, results, prior); note != "" {
			fmt.Fprintln(w, note)
		}
	}
	if regressions > 0 {
		return withExitCode(1, nil)
	}
	return nil
}

func printCompareTable(w io.Writer, results []*gate.StatResult, gated []bool, nb, nh int, o compareOptions) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	arrow := map[gate.Direction]string{gate.HigherIsBetter: "↑", gate.LowerIsBetter: "↓"}
	var notes []string
	width := 0
	for _, r := range results {
		width = max(width, len(r.Metric)+1)
	}
	fmt.Fprintf(tw, "%-*s\t\tbase median\thead median\tchange\tratio [CI]\tp\tn\tverdict\t\n", width, "metric")
	for i, r := range results {
		mark := ""
		if gated[i] {
			mark = "*"
		}
		name := fmt.Sprintf("%-*s", width, r.Metric+mark)
		verdict := strings.ReplaceAll(rowVerdict(r, gated[i]), "_", " ")
		if r.Outcome == gate.Undecided && r.MoreTrials > 0 {
			verdict += fmt.Sprintf(" (+%d)", r.MoreTrials)
		}
		if r.Outcome == gate.StatError {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\t%d/%d\terror: %s\t\n", name, arrow[r.Direction], r.NBase, r.NHead, r.Reason)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.3f [%.3f, %.3f]\t%s\t%d/%d\t%s\t\n", name, arrow[r.Direction],
			fmtVal(r.BaseMedian), fmtVal(r.HeadMedian), pct(r.Change), r.Ratio, r.CILow, r.CIHigh, pval(r.PValue), r.NBase, r.NHead, verdict)
		if gated[i] && (r.Outcome == gate.Regression || r.Outcome == gate.Undecided) {
			notes = append(notes, fmt.Sprintf("%s: %s: %s", r.Metric, r.Outcome, r.Reason))
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d base vs %d head trials. * gated: Holm-Bonferroni over %d metrics at alpha %g, min effect %g%%; a gated regression exits 1.\n"+
		"Not gated: worse/better = significant at alpha %g uncorrected, for information. ↑ higher is better, ↓ lower is better;\n"+
		"CI ≈ 95%% (Hodges-Lehmann/Moses); (+N) more trials per side would likely decide.\n",
		nb, nh, countTrue(gated), o.alpha, 100*o.minEffect, o.alpha)
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

// rowVerdict is a metric's verdict as printed: the outcome for gated metrics; for the others,
// which are neither Holm-corrected nor part of the exit code, a significant change is called
// "worse" or "better" instead of regression or improvement.
func rowVerdict(r *gate.StatResult, gated bool) string {
	if gated {
		return string(r.Outcome)
	}
	switch r.Outcome {
	case gate.Regression:
		return "worse"
	case gate.Improvement:
		return "better"
	}
	return string(r.Outcome)
}

func countTrue(b []bool) int {
	n := 0
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func fmtVal(x float64) string {
	switch a := math.Abs(x); {
	case a >= 1000:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	default:
		return strconv.FormatFloat(x, 'g', 3, 64)
	}
}

func pct(f float64) string {
	if math.IsNaN(f) {
		return "?"
	}
	return fmt.Sprintf("%+.1f%%", 100*f)
}

func pval(p float64) string {
	if p < 0.001 {
		return fmt.Sprintf("%.0e", p)
	}
	return fmt.Sprintf("%.3f", p)
}

// commonMetrics returns the metrics with a known direction present in every trial, sorted with
// throughput first.
func commonMetrics(sets ...[]map[string]float64) []string {
	count, total := metricCounts(sets...)
	var out []string
	for k, c := range count {
		if _, ok := gate.MetricFor(k); ok && c == total {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		mi, _ := gate.MetricFor(out[i])
		mj, _ := gate.MetricFor(out[j])
		if mi.Direction != mj.Direction {
			return mi.Direction == gate.HigherIsBetter
		}
		return out[i] < out[j]
	})
	return out
}

func column(trials []map[string]float64, metric string) []float64 {
	out := make([]float64, 0, len(trials))
	for _, t := range trials {
		out = append(out, t[metric])
	}
	return out
}
