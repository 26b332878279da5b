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
	"github.com/reckon-ci/reckon/workload"
)

func init() { rootCmd.AddCommand(newCompareCmd()) }

// defaultGated are the metrics whose regressions decide compare's exit code unless --gate says
// otherwise. Holm-Bonferroni runs over these only: correcting over every printed metric would
// cost all the power.
var defaultGated = []string{"output_throughput", "median_ttft_ms", "median_tpot_ms"}

type compareOptions struct {
	base, head []string
	json       bool
	alpha      float64
	minEffect  float64
	gate       string
	twoSided   bool
	strict     bool
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
input or output length, dataset) a warning names the difference; --strict makes it an error.

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
}

// parseMinEffect reads a minimum effect as the spec writes it: "5%" or a fraction below 1
// ("0.05"); it returns the fraction.
func parseMinEffect(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pctForm := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("--min-effect %q: expected a percentage such as 5%% or a fraction below 1 such as 0.05", s)
	}
	if pctForm {
		v /= 100
	} else if v >= 1 {
		return 0, fmt.Errorf("--min-effect %q: a bare number is a fraction and must be below 1; write %s%% for %s percent", s, t, t)
	}
	if v < 0 || v >= 1 {
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
		if d := levenshtein(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev = cur
	}
	return prev[len(b)]
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
	baseSet, err := loadTrials(o.base)
	if err != nil {
		return withExitCode(2, fmt.Errorf("--base: %w", err))
	}
	headSet, err := loadTrials(o.head)
	if err != nil {
		return withExitCode(2, fmt.Errorf("--head: %w", err))
	}
	if diffs := workloadDiffs(baseSet, headSet); len(diffs) > 0 {
		msg := "the base and head workloads differ: " + strings.Join(diffs, "; ")
		if o.strict {
			return withExitCode(2, errors.New(msg+" (--strict)"))
		}
		fmt.Fprintf(errw, "reckon compare: warning: %s\n", msg)
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
		if err := enc.Encode(map[string]any{"metrics": rows, "regressions": regressions}); err != nil {
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

// trialSet is the trials of one side: per trial its metrics and the workload that produced it.
type trialSet struct {
	metrics   []map[string]float64
	workloads []workloadKey
	files     []string
}

// workloadKey is what must match for two trials to be comparable.
type workloadKey struct {
	Model, Dataset                   string
	MaxConcurrency, InputLen, OutLen int
	RequestRate                      float64
}

// loadTrialSet reads every file and returns each trial's metrics (each result of a file is one
// trial).
func loadTrialSet(paths []string) ([]map[string]float64, error) {
	ts, err := loadTrials(paths)
	if err != nil {
		return nil, err
	}
	return ts.metrics, nil
}

// loadTrials reads every file; each result of a file is one trial.
func loadTrials(paths []string) (*trialSet, error) {
	ts := &trialSet{}
	for _, p := range paths {
		rs, err := importTrials(p)
		if err != nil {
			return nil, err
		}
		for i, r := range rs {
			m := r.Metrics()
			if len(m) == 0 {
				return nil, fmt.Errorf("%s: result %d has no metrics", p, i+1)
			}
			w := r.Metadata.Workload
			ts.metrics = append(ts.metrics, m)
			ts.workloads = append(ts.workloads, workloadKey{Model: r.Metadata.Model, Dataset: w.Dataset, MaxConcurrency: w.MaxConcurrency,
				InputLen: w.InputLen, OutLen: w.OutputLen, RequestRate: w.RequestRate})
			ts.files = append(ts.files, p)
		}
	}
	return ts, nil
}

// importTrials reads one result file in any format `reckon import` reads and returns its
// results (vLLM key names). A file with several results (JSON lines: SGLang bench_serving, vLLM
// --append-result) gives one trial per result.
var importTrials = func(path string) ([]*workload.Result, error) {
	return workload.ImportAll(path)
}

// workloadDiffs names every workload field whose values differ between or within the two
// sides (e.g. "max_concurrency: base 4, head 8").
func workloadDiffs(base, head *trialSet) []string {
	type field struct {
		name string
		get  func(workloadKey) string
	}
	fields := []field{
		{"model", func(k workloadKey) string { return k.Model }},
		{"max_concurrency", func(k workloadKey) string { return strconv.Itoa(k.MaxConcurrency) }},
		{"request_rate", func(k workloadKey) string {
			if k.RequestRate == 0 {
				return "inf"
			}
			return strconv.FormatFloat(k.RequestRate, 'g', -1, 64)
		}},
		{"input_len", func(k workloadKey) string { return strconv.Itoa(k.InputLen) }},
		{"output_len", func(k workloadKey) string { return strconv.Itoa(k.OutLen) }},
		{"dataset", func(k workloadKey) string { return k.Dataset }},
	}
	values := func(ts *trialSet, f field) []string {
		set := map[string]bool{}
		for _, k := range ts.workloads {
			set[f.get(k)] = true
		}
		out := make([]string, 0, len(set))
		for v := range set {
			if v == "" {
				v = "(unknown)"
			}
			out = append(out, v)
		}
		sort.Strings(out)
		return out
	}
	var diffs []string
	for _, f := range fields {
		b, h := values(base, f), values(head, f)
		if strings.Join(b, ",") != strings.Join(h, ",") || len(b) > 1 {
			diffs = append(diffs, fmt.Sprintf("%s: base %s, head %s", f.name, strings.Join(b, "|"), strings.Join(h, "|")))
		}
	}
	return diffs
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
