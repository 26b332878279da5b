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
	"github.com/spf13/pflag"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/num"
	"github.com/reckon-ci/reckon/internal/textutil"
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

Exit code: 0 no gated regression, 1 a gated regression, 2 bad input.`,
		Example: `  reckon compare --base main/run*.json --head pr/run*.json
  reckon compare --base a1.json a2.json a3.json --head b1.json b2.json b3.json --json
  reckon compare --base=a1.json,a2.json --head=b1.json,b2.json --min-effect 5% --gate all`,
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

// defineCompareFlags defines compare's flags on fs (help lists them; parseCompareArgs parses
// them) with o's fields as their values.
func defineCompareFlags(fs *pflag.FlagSet, o *compareOptions) {
	fs.StringSliceVar(&o.base, "base", nil, "base trial files (every argument up to the next flag; or --base=a,b)")
	fs.StringSliceVar(&o.head, "head", nil, "head trial files (every argument up to the next flag; or --head=a,b)")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	fs.Float64Var(&o.alpha, "alpha", 0.01, "one-sided significance level of a regression (before Holm), in (0, 0.5)")
	fs.String("min-effect", "2%", "minimum change of the median that counts: a percentage (5%) or a fraction below 1 (0.05)")
	fs.StringVar(&o.gate, "gate", strings.Join(defaultGated, ","), `comma-separated metrics that decide the exit code, or "all"`)
	fs.BoolVar(&o.twoSided, "two-sided", false, "test both directions at alpha/2 each")
	fs.BoolVar(&o.strict, "strict", false, "an error, not a warning, when the two sides' workloads differ")
	fs.StringVar(&o.baseVersion, "base-tool-version", "", "version of the tool that wrote the base files, where the files do not say (vLLM: e.g. 0.25.1); see reckon import --help")
	fs.StringVar(&o.headVersion, "head-tool-version", "", "the same for the head files")
}

// parseMinEffect reads a minimum effect as the spec writes it: "5%" or a fraction below 1
// ("0.05"); it returns the fraction.
func parseMinEffect(s string) (float64, error) {
	v, _, err := num.ParseFraction(s)
	switch {
	case errors.Is(err, num.ErrBareWhole):
		t := strings.TrimSpace(s)
		return 0, fmt.Errorf("--min-effect %q: a bare number is a fraction and must be below 1; write %s%% for %s percent", s, t, t)
	case err != nil:
		return 0, fmt.Errorf("--min-effect %q: expected a percentage such as 5%% or a fraction below 1 such as 0.05", s)
	case v < 0 || v >= 1:
		return 0, fmt.Errorf("--min-effect %q: expected an effect in [0%%, 100%%)", s)
	}
	return v, nil
}

// parseCompareArgs parses compare's arguments by hand: --base and --head take every following
// argument up to the next flag, so that shell globs work (--base main/*.json --head pr/*.json).
// help is the FlagSet the command defines (for the flag names and for suggestions).
func parseCompareArgs(help *pflag.FlagSet, args []string) (compareOptions, bool, error) {
	var o compareOptions
	fs := pflag.NewFlagSet("compare", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defineCompareFlags(fs, &o)
	fs.String("log-format", "text", "log format")
	fs.String("log-level", "info", "log level")
	wantHelp := fs.BoolP("help", "h", false, "help")
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	_ = help
	var rest []string
	var into *[]string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--base" || a == "--head":
			into = &o.base
			if a == "--head" {
				into = &o.head
			}
		case strings.HasPrefix(a, "--base=") || strings.HasPrefix(a, "--head="):
			into = nil
			list := &o.base
			if strings.HasPrefix(a, "--head=") {
				list = &o.head
			}
			for _, p := range strings.Split(a[len("--base="):], ",") {
				if p != "" {
					*list = append(*list, p)
				}
			}
		case strings.HasPrefix(a, "-") && a != "-":
			into = nil
			name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
			f := fs.Lookup(name)
			if f == nil && len(name) == 1 {
				f = fs.ShorthandLookup(name)
			}
			if f == nil {
				msg := fmt.Sprintf("unknown flag %s", strings.SplitN(a, "=", 2)[0])
				if near := closestName(name, names); near != "" {
					msg += fmt.Sprintf(" (did you mean --%s?)", near)
				}
				return o, false, errors.New(msg + "; see reckon compare --help")
			}
			rest = append(rest, a)
			// Flags with a separate value consume it.
			if f.Value.Type() != "bool" && !strings.Contains(a, "=") {
				if i+1 >= len(args) {
					return o, false, fmt.Errorf("flag %s needs a value", a)
				}
				i++
				rest = append(rest, args[i])
			}
		case into != nil:
			*into = append(*into, a)
		default:
			return o, false, fmt.Errorf("unexpected argument %q: trial files follow --base or --head", a)
		}
	}
	base, head := o.base, o.head
	if err := fs.Parse(rest); err != nil {
		return o, false, err
	}
	o.base, o.head = base, head
	if *wantHelp {
		return o, true, nil
	}
	me, err := parseMinEffect(fs.Lookup("min-effect").Value.String())
	if err != nil {
		return o, false, err
	}
	o.minEffect = me
	if len(o.base) == 0 || len(o.head) == 0 {
		return o, false, errors.New("compare needs trial files for both --base and --head")
	}
	if !(o.alpha > 0 && o.alpha < 0.5) {
		return o, false, fmt.Errorf("--alpha %v: expected 0 < alpha < 0.5", o.alpha)
	}
	return o, false, nil
}

// closestName is the name in names nearest to s (edit distance at most 2), or "".
func closestName(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := textutil.EditDistance(s, n, false); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// compareRow is one metric of compare's --json output.
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
}

func numPtr(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

func runCompare(w, errw io.Writer, o compareOptions) error {
	baseSet, err := loadTrialsWith(o.base, workload.ImportOptions{ToolVersion: o.baseVersion})
	if err != nil {
		return withExitCode(2, fmt.Errorf("--base: %w", err))
	}
	headSet, err := loadTrialsWith(o.head, workload.ImportOptions{ToolVersion: o.headVersion})
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
	results := make([]*gate.StatResult, len(names))
	var family []*gate.StatResult
	isGated := make([]bool, len(names))
	for i, name := range names {
		m, _ := gate.MetricFor(name)
		r := gate.Compare(column(base, name), column(head, name), m, opts)
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
			Gated: isGated[i], NBase: r.NBase, NHead: r.NHead, Reason: r.Reason, MoreTrials: r.MoreTrials}
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
	count := map[string]int{}
	total := 0
	for _, set := range sets {
		for _, t := range set {
			total++
			for k := range t {
				count[k]++
			}
		}
	}
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

// trialSet is the trials of one side: per trial its metrics, the workload that produced it and
// the definitions it was measured with.
type trialSet struct {
	metrics   []map[string]float64
	workloads []workloadKey
	semantics []*workload.Semantics
	files     []string
}

// workloadKey is what must match for two trials to be comparable, each field as printed; ""
// is a setting the trial's file does not record (unknown).
type workloadKey struct {
	Model, Dataset, MaxConcurrency, RequestRate, InputLens, OutputLens, IgnoreEOS, Temperature string
}

// keyOf is a result's workloadKey: the dataset normalised across tools, lengths as the interval
// they were drawn from, unrecorded settings "".
func keyOf(r *workload.Result) workloadKey {
	w := r.Metadata.Workload
	k := workloadKey{Model: r.Metadata.Model, Dataset: workload.DatasetKind(w.Dataset), MaxConcurrency: "none", RequestRate: "inf"}
	if w.MaxConcurrency > 0 {
		k.MaxConcurrency = strconv.Itoa(w.MaxConcurrency)
	}
	if w.RequestRate > 0 {
		k.RequestRate = strconv.FormatFloat(w.RequestRate, 'g', -1, 64)
	}
	if r.Metadata.Labels["request_rate"] == "trace" {
		k.RequestRate = "trace"
	}
	lens := func(rg *workload.LenRange, l int) string {
		if rg != nil {
			return rg.String()
		}
		if l > 0 && w.RangeRatio == 0 {
			return strconv.Itoa(l)
		}
		return ""
	}
	k.InputLens, k.OutputLens = lens(w.InputLens, w.InputLen), lens(w.OutputLens, w.OutputLen)
	if w.IgnoreEOS != nil {
		k.IgnoreEOS = strconv.FormatBool(*w.IgnoreEOS)
	}
	switch {
	case w.Temperature != nil:
		k.Temperature = strconv.FormatFloat(*w.Temperature, 'g', -1, 64)
	case w.TemperatureServerDefault:
		k.Temperature = "server default"
	}
	return k
}

// loadTrialSet reads every file and returns each trial's metrics (each result of a file is one
// trial).
func loadTrialSet(paths []string) ([]map[string]float64, error) {
	ts, err := loadTrialsWith(paths, workload.ImportOptions{})
	if err != nil {
		return nil, err
	}
	return ts.metrics, nil
}

// loadTrialsWith reads every file; each result of a file is one trial.
func loadTrialsWith(paths []string, opts workload.ImportOptions) (*trialSet, error) {
	ts := &trialSet{}
	for _, p := range paths {
		rs, err := importTrials(p, opts)
		if err != nil {
			return nil, err
		}
		for i, r := range rs {
			m := r.Metrics()
			if len(m) == 0 {
				return nil, fmt.Errorf("%s: result %d has no metrics", p, i+1)
			}
			ts.metrics = append(ts.metrics, m)
			ts.workloads = append(ts.workloads, keyOf(r))
			ts.semantics = append(ts.semantics, r.Metadata.Semantics)
			ts.files = append(ts.files, p)
		}
	}
	return ts, nil
}

// importTrials reads one result file in any format `reckon import` reads and returns its
// results (vLLM key names). A file with several results (JSON lines: SGLang bench_serving, vLLM
// --append-result) gives one trial per result.
var importTrials = func(path string, opts workload.ImportOptions) ([]*workload.Result, error) {
	return workload.ImportAllWith(path, opts)
}

// workloadDiffs names every workload setting whose recorded values differ between or within the
// two sides (e.g. "max_concurrency: base 4, head 8"), and, apart, every setting one side does
// not record while the other does (e.g. "input_lens: base unknown, head 32"): an unknown is
// not a difference, and never printed as 0.
func workloadDiffs(base, head *trialSet) (diffs, unrecorded []string) {
	type field struct {
		name string
		get  func(workloadKey) string
	}
	fields := []field{
		{"model", func(k workloadKey) string { return k.Model }},
		{"max_concurrency", func(k workloadKey) string { return k.MaxConcurrency }},
		{"request_rate", func(k workloadKey) string { return k.RequestRate }},
		{"input_lens", func(k workloadKey) string { return k.InputLens }},
		{"output_lens", func(k workloadKey) string { return k.OutputLens }},
		{"dataset", func(k workloadKey) string { return k.Dataset }},
		{"ignore_eos", func(k workloadKey) string { return k.IgnoreEOS }},
		{"temperature", func(k workloadKey) string { return k.Temperature }},
	}
	values := func(ts *trialSet, f field) (known []string, unknown int) {
		set := map[string]bool{}
		for _, k := range ts.workloads {
			if v := f.get(k); v != "" {
				set[v] = true
			} else {
				unknown++
			}
		}
		for v := range set {
			known = append(known, v)
		}
		sort.Strings(known)
		return known, unknown
	}
	show := func(known []string, unknown int) string {
		out := strings.Join(known, "|")
		if unknown > 0 {
			if out != "" {
				out += "|"
			}
			out += "unknown"
		}
		return out
	}
	for _, f := range fields {
		b, bu := values(base, f)
		h, hu := values(head, f)
		line := fmt.Sprintf("%s: base %s, head %s", f.name, show(b, bu), show(h, hu))
		switch {
		case len(b) > 1 || len(h) > 1 || (len(b) == 1 && len(h) == 1 && b[0] != h[0]):
			diffs = append(diffs, line)
		case bu > 0 || hu > 0:
			if len(b)+len(h) > 0 {
				unrecorded = append(unrecorded, line)
			}
		}
	}
	return diffs, unrecorded
}

// semanticsReport is what compare says about the definitions of the two sides.
type semanticsReport struct {
	sides map[string][]*workload.Semantics
	diffs []string
	notes []string
}

// sideSemantics collects each side's distinct definitions and names those that differ between
// the two sides (or within one).
func sideSemantics(base, head *trialSet) semanticsReport {
	distinct := func(ss []*workload.Semantics) []*workload.Semantics {
		var out []*workload.Semantics
		seen := map[string]bool{}
		for _, s := range ss {
			k := "<nil>"
			if s != nil {
				k = fmt.Sprintf("%+v", *s)
			}
			if !seen[k] {
				seen[k] = true
				out = append(out, s)
			}
		}
		return out
	}
	b, h := distinct(base.semantics), distinct(head.semantics)
	rep := semanticsReport{sides: map[string][]*workload.Semantics{"base": b, "head": h}}
	for _, side := range []struct {
		name string
		ss   []*workload.Semantics
	}{{"base", b}, {"head", h}} {
		var read []string
		for _, s := range side.ss {
			if s == nil {
				read = append(read, "unknown definitions")
				continue
			}
			read = append(read, fmt.Sprintf("%s, version %s: %s", s.Tool, s.Version, s.Basis))
		}
		rep.notes = append(rep.notes, fmt.Sprintf("%s read with %s", side.name, strings.Join(read, "; ")))
	}
	seen := map[string]bool{}
	for _, x := range b {
		for _, y := range h {
			for _, d := range workload.DefinitionDiffs(x, y) {
				if !seen[d] {
					seen[d] = true
					rep.diffs = append(rep.diffs, d)
				}
			}
		}
	}
	if len(b) > 1 || len(h) > 1 {
		rep.notes = append(rep.notes, "warning: one side mixes results measured with different definitions")
	}
	for _, d := range rep.diffs {
		rep.notes = append(rep.notes, "definitions differ: "+d)
	}
	return rep
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// partialMetrics returns the metrics with a known direction that some trials have and others
// (of either side) lack: they are not compared.
func partialMetrics(sets ...[]map[string]float64) []string {
	count := map[string]int{}
	total := 0
	for _, set := range sets {
		for _, t := range set {
			total++
			for k := range t {
				count[k]++
			}
		}
	}
	var out []string
	for k, c := range count {
		if _, ok := gate.MetricFor(k); ok && c < total {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
