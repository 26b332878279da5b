package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/reporters"
)

func init() { rootCmd.AddCommand(newBaselineCmd()) }

func newBaselineCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "baseline",
		Short: "Record, review and show the stored baselines (baselines/<testbed>/<spec>.json)",
		Long: `Baselines hold every trial's value per config, workload and metric, for one spec on one testbed,
with provenance (date, git commit, engine and reckon versions, source results file). They are data
reviewed in pull requests: record from a run's results.json, look at "baseline diff" in review, and
commit the file. See docs/baselines.md.`,
	}
	cmd.AddCommand(newBaselineRecordCmd(), newBaselineDiffCmd(), newBaselineShowCmd())
	return cmd
}

type baselineFlags struct {
	from  string
	dir   string
	force bool
	merge bool
	note  string
	json  bool
	// strict refuses a baseline whose noise cannot support its checks (noiseProblems).
	strict bool
	// allowRed records a run some of whose checks failed or errored (redChecks).
	allowRed bool
	// diffOnly builds the baseline to show what recording would change (baseline diff): a red
	// run is shown, with a warning, not refused.
	diffOnly bool
}

func newBaselineRecordCmd() *cobra.Command {
	var f baselineFlags
	cmd := &cobra.Command{
		Use:   "record --from RESULTS [--baselines DIR] [--force] [--merge] [--strict] [--allow-red]",
		Short: "Write the trials of a run's results.json as the baseline of its testbed and spec",
		Long: `record writes baselines/<testbed-key>/<spec-name>.json from a run's results.json: every config with
throughput trials, every workload, every metric, all samples. The write is atomic (temporary file +
rename) and holds a lock, so concurrent recorders never corrupt the file. An existing baseline is
never replaced without --force. --merge adds the run's configs to an existing baseline (configs it
already has are replaced only with --force), so that runs that measured different configs can record
into one file.

record measures each gated metric's noise (within-launch CV, and between-launch CV when the run
relaunched its configs; the baseline keeps the launches) and warns when a run of the same design
could never decide the spec's checks (its interval of the ratio wider than the no-change margin);
with --strict it then refuses. See docs/baselines.md, "Noise".

A red run (a check failed, was unverified or errored: a regression, a broken allreduce, an engine
that did not start) is refused, naming its checks: recording it would make the regression the
reference that later runs pass against. --allow-red records it anyway (the provenance's note says
so). Checks that only had no baseline to compare with do not count (the first recording).`,
		Example: `  reckon baseline record --from out/results.json
  reckon baseline diff --from out/results.json && reckon baseline record --from out/results.json --force`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, path, err := baselineFromResults(f)
			if err != nil {
				return withExitCode(2, err)
			}
			if problems := noiseProblems(cmd.ErrOrStderr(), f.from, b); len(problems) > 0 && f.strict {
				return withExitCode(2, fmt.Errorf("%s: the noise cannot support the checks' min_effect (--strict): %s; nothing recorded", f.from, strings.Join(problems, "; ")))
			}
			var old *gate.Baseline
			if prev, rerr := gate.ReadBaseline(path); rerr == nil {
				old = prev
			} else if !errors.Is(rerr, fs.ErrNotExist) {
				// Bad input, not an infrastructure failure: the stored file must be repaired or
				// removed by hand (--force never overwrites a file it cannot read).
				return withExitCode(2, fmt.Errorf("%w\nthe stored baseline is unreadable; restore it (git checkout %s) or remove it, then record again", rerr, path))
			}
			write := gate.WriteBaseline
			if f.merge {
				write = gate.MergeBaseline
			}
			if err := write(path, b, f.force); err != nil {
				if errors.Is(err, gate.ErrBaselineExists) {
					return withExitCode(1, err)
				}
				return withExitCode(3, err)
			}
			written, err := gate.ReadBaseline(path)
			if err != nil {
				return withExitCode(3, fmt.Errorf("reading back what was written: %w", err))
			}
			printDiff(cmd.OutOrStdout(), gate.DiffBaselines(old, written), false)
			fmt.Fprintf(cmd.OutOrStdout(), "recorded %s (%d configs); commit it for review\n", path, len(written.Configs))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "", "results.json of the run to record (required)")
	baselinesFlag(fl, &f.dir)
	fl.BoolVar(&f.force, "force", false, "replace an existing baseline (or, with --merge, existing configs)")
	fl.BoolVar(&f.merge, "merge", false, "add the run's configs to the existing baseline instead of replacing it")
	fl.StringVar(&f.note, "note", "", "free-text note stored in the provenance (why it was recorded)")
	fl.BoolVar(&f.strict, "strict", false, "refuse to record when the measured noise cannot support the checks' min_effect (otherwise a warning)")
	fl.BoolVar(&f.allowRed, "allow-red", false, "record a run some of whose checks failed, were unverified or errored (refused otherwise)")
	return cmd
}

// redChecks names the checks that make run red for recording: every check that failed or
// errored, except those whose only fault is that there was no baseline to compare with (a
// first recording).
func redChecks(run *gate.Run) []string {
	var red []string
	for _, c := range run.EffectiveChecks() {
		if c.Outcome == gate.NoBaseline {
			continue
		}
		switch st := c.EffectiveStatus(); st {
		case gate.StatusFailed, gate.StatusError:
			msg := reporters.FitMessage(c.Message, 160) // the fix, at its end, stays whole
			red = append(red, fmt.Sprintf("%q %s (%s)", c.Name, st, msg))
		}
	}
	return red
}

func newBaselineDiffCmd() *cobra.Command {
	var f baselineFlags
	cmd := &cobra.Command{
		Use:   "diff --from RESULTS [--baselines DIR] [--json]",
		Short: "Show what recording RESULTS would change in the stored baseline",
		Long: `diff prints, per config, workload and metric, the stored median and sample count against the new
ones (added, removed, changed, unchanged), without writing anything. Use it in review before
"baseline record --force".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.diffOnly = true
			b, path, err := baselineFromResults(f)
			if err != nil {
				return withExitCode(2, err)
			}
			old, err := gate.LoadBaseline(f.dir, b.TestbedKey, b.SpecName)
			if err != nil && !gate.IsNoBaseline(err) {
				return withExitCode(2, err)
			}
			if gate.IsNoBaseline(err) {
				fmt.Fprintf(cmd.ErrOrStderr(), "no stored baseline at %s: everything would be added\n", path)
			}
			ch := gate.DiffBaselines(old, b)
			if f.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"path": path, "changes": ch})
			}
			printDiff(cmd.OutOrStdout(), ch, true)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "", "results.json of the run (required)")
	baselinesFlag(fl, &f.dir)
	fl.BoolVar(&f.json, "json", false, "print JSON")
	return cmd
}

func newBaselineShowCmd() *cobra.Command {
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show [FILE | TESTBED-KEY [SPEC]] [--baselines DIR]",
		Short: "List the stored baselines, or summarise one",
		Args:  cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			var b *gate.Baseline
			var err error
			switch {
			case len(args) == 0:
				return listBaselines(w, cmd.ErrOrStderr(), dir)
			case len(args) == 1 && strings.HasSuffix(args[0], ".json"):
				b, err = gate.ReadBaseline(args[0])
			case len(args) == 1:
				return listBaselines(w, cmd.ErrOrStderr(), filepath.Join(dir, args[0]))
			default:
				b, err = gate.LoadBaseline(dir, args[0], args[1])
			}
			if err != nil {
				return withExitCode(2, err)
			}
			if asJSON {
				data, err := b.Encode()
				if err != nil {
					return withExitCode(3, err)
				}
				_, err = w.Write(data)
				return err
			}
			showBaseline(w, b)
			return nil
		},
	}
	baselinesFlag(cmd.Flags(), &dir)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the baseline file")
	return cmd
}

// baselineFromResults builds a baseline from a results.json.
func baselineFromResults(f baselineFlags) (*gate.Baseline, string, error) {
	if f.from == "" {
		return nil, "", errors.New("--from RESULTS is required (the results.json a gate run wrote, e.g. out/results.json)")
	}
	run, err := gate.ReadResults(f.from)
	if err != nil {
		return nil, "", err
	}
	if run.Interrupted {
		return nil, "", fmt.Errorf("%s: the run was interrupted; its trials are partial and cannot become a baseline", f.from)
	}
	if run.SpecName == "" {
		return nil, "", fmt.Errorf("%s: field spec_name is empty; expected the spec's name", f.from)
	}
	if run.TestbedKey == "" {
		return nil, "", fmt.Errorf("%s: field testbed_key is empty; expected the testbed key the run measured (reckon doctor prints it)", f.from)
	}
	b := &gate.Baseline{
		Schema: gate.BaselineSchema, SpecName: run.SpecName, TestbedKey: run.TestbedKey, Testbed: finiteOnly(run.Testbed),
		Provenance: gate.Provenance{
			RecordedAt: time.Now().UTC().Truncate(time.Second), GitCommit: run.GitCommit, Engine: run.Engine,
			ReckonVersion: run.ReckonVersion, Source: f.from, Note: f.note,
		},
	}

	if b.Provenance.ReckonVersion == "" {
		b.Provenance.ReckonVersion = version
	}
	if !run.FinishedAt.IsZero() {
		b.Provenance.RecordedAt = run.FinishedAt.UTC()
	}
	for _, c := range run.Configs {
		if v := engineVersion(c.Engine); v != "" && b.Provenance.EngineVersion == "" {
			b.Provenance.EngineVersion = v
		}
		if c.LaunchError != "" {
			logrus.Warnf("config %s did not launch (%s); not recorded", c.Name, c.LaunchError)
			continue
		}
		if err := measurementsPassed(run, c.Name); err != nil {
			return nil, "", fmt.Errorf("%s: %w; a failed measurement cannot become a baseline (run the gate again)", f.from, err)
		}
		byWorkload := map[string]map[string][]float64{}
		launchOf := map[string]map[string][]int{}
		var order []string
		for ti, t := range c.Trials {
			wl := t.Workload
			if wl == "" {
				return nil, "", fmt.Errorf("%s: configs[%s].trials[%d].workload is empty", f.from, c.Name, ti)
			}
			if byWorkload[wl] == nil {
				byWorkload[wl] = map[string][]float64{}
				launchOf[wl] = map[string][]int{}
				order = append(order, wl)
			}
			if err := trialMeasured(t); err != nil {
				return nil, "", fmt.Errorf("%s: configs[%s].trials[%d] (workload %s): %w; such a trial cannot become a baseline", f.from, c.Name, ti, wl, err)
			}
			for k, v := range t.Metrics {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					logrus.Warnf("config %s workload %s trial %d: %s is %v; sample skipped", c.Name, wl, t.Index, k, v)
					continue
				}
				byWorkload[wl][k] = append(byWorkload[wl][k], v)
				launchOf[wl][k] = append(launchOf[wl][k], max(1, t.Launch))
			}
		}
		if len(order) == 0 {
			logrus.Infof("config %s has no throughput trials; not recorded", c.Name)
			continue
		}
		bc := gate.BaselineConfig{Name: c.Name, Engine: finiteOnly(c.Engine)}
		for _, wl := range order {
			bw := gate.BaselineWorkload{Name: wl, Metrics: map[string]gate.MetricSamples{}}
			for k, s := range byWorkload[wl] {
				m, _ := gate.MetricFor(k)
				bw.Metrics[k] = gate.NewLaunchSamples(s, launchOf[wl][k], m.Unit)
			}
			bc.Workloads = append(bc.Workloads, bw)
		}
		b.Configs = append(b.Configs, bc)
	}
	if len(b.Configs) == 0 {
		return nil, "", fmt.Errorf("%s: no config has throughput trials; nothing to record", f.from)
	}
	// After the measurements' own refusals, which --allow-red does not lift.
	red := redChecks(run)
	if len(red) > 0 && f.diffOnly {
		logrus.Warnf("%s: the run is red (%s, %d checks failed or errored); baseline record refuses it without --allow-red", f.from, run.Verdict(), len(red))
		red = nil
	}
	if len(red) > 0 && !f.allowRed {
		shown := red
		if len(shown) > 5 {
			shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(red)-5))
		}
		return nil, "", fmt.Errorf("%s: the run is red (%s): %s; a red run would become the reference later runs pass against. Fix the cause and run again, or pass --allow-red to record it anyway", f.from, run.Verdict(), strings.Join(shown, "; "))
	}
	if len(red) > 0 {
		// --allow-red: the file says so to whoever reviews it.
		what := fmt.Sprintf("recorded from a red run (--allow-red, %s: %d checks failed or errored)", run.Verdict(), len(red))
		logrus.Warn(what)
		b.Provenance.Note = strings.TrimPrefix(b.Provenance.Note+"; "+what, "; ")
	}
	if err := b.Validate(); err != nil {
		return nil, "", fmt.Errorf("%s: %w", f.from, err)
	}
	return b, gate.BaselinePath(f.dir, b.TestbedKey, b.SpecName), nil
}

// finiteOnly returns a copy of m without non-finite numbers (JSON cannot hold them; a report
// field the engine did not print is simply absent from the baseline).
func finiteOnly(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				continue
			}
		case map[string]any:
			v = finiteOnly(x)
		}
		out[k] = v
	}
	return out
}

// engineVersion picks the engine version out of an EngineReport object.
func engineVersion(report map[string]any) string {
	for _, k := range []string{"engine_version", "version"} {
		if s, ok := report[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

func printDiff(w io.Writer, ch []gate.BaselineChange, all bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "config\tworkload\tmetric\tstatus\told median (n)\tnew median (n)\tchange")
	counts := map[string]int{}
	for _, c := range ch {
		counts[c.Status]++
		if c.Status == "unchanged" && !all {
			continue
		}
		oldS, newS, change := "–", "–", ""
		if c.OldN > 0 {
			oldS = fmt.Sprintf("%s (%d)", fmtVal(c.OldMedian), c.OldN)
		}
		if c.NewN > 0 {
			newS = fmt.Sprintf("%s (%d)", fmtVal(c.NewMedian), c.NewN)
		}
		if c.Status == "changed" || c.Status == "unchanged" {
			change = pct(c.Change)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Config, c.Workload, c.Metric, c.Status, oldS, newS, change)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d added, %d removed, %d changed, %d unchanged\n", counts["added"], counts["removed"], counts["changed"], counts["unchanged"])
}

func showBaseline(w io.Writer, b *gate.Baseline) {
	p := b.Provenance
	fmt.Fprintf(w, "baseline %s\n  spec %s, testbed %s\n  recorded %s from %s\n  git %s, engine %s %s, reckon %s\n",
		nonEmpty(b.Path()), b.SpecName, b.TestbedKey, p.RecordedAt.Format(time.RFC3339), nonEmpty(p.Source),
		nonEmpty(p.GitCommit), nonEmpty(p.Engine), p.EngineVersion, nonEmpty(p.ReckonVersion))
	if p.Note != "" {
		fmt.Fprintf(w, "  note: %s\n", p.Note)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "config\tworkload\tmetric\tmedian\tn\tmin\tmax")
	for _, c := range b.Configs {
		for _, wl := range c.Workloads {
			keys := make([]string, 0, len(wl.Metrics))
			for k := range wl.Metrics {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				m := wl.Metrics[k]
				lo, hi := m.Samples[0], m.Samples[0]
				for _, s := range m.Samples {
					lo, hi = math.Min(lo, s), math.Max(hi, s)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", c.Name, wl.Name, k, fmtVal(m.Median), len(m.Samples), fmtVal(lo), fmtVal(hi))
			}
		}
	}
	tw.Flush()
}

func nonEmpty(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// listBaselines prints every baseline file under dir with its provenance, and warns (on
// errW) about a file whose content belongs to another testbed or spec than its place says:
// the gate, which looks baselines up by place, refuses such a file.
func listBaselines(w, errW io.Writer, dir string) error {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".json") && !strings.HasPrefix(d.Name(), ".") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return withExitCode(2, fmt.Errorf("listing baselines: %w", err))
	}
	if len(files) == 0 {
		fmt.Fprintf(w, "no baselines under %s; record one with reckon baseline record --from out/results.json\n", dir)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "file\ttestbed\tspec\tconfigs\trecorded\tgit")
	bad := 0
	var warnings []string
	for _, f := range files {
		b, err := gate.ReadBaseline(f)
		if err != nil {
			bad++
			fmt.Fprintf(tw, "%s\tERROR: %v\t\t\t\t\n", f, err)
			continue
		}
		wantSpec := strings.TrimSuffix(filepath.Base(f), ".json")
		wantTestbed := filepath.Base(filepath.Dir(f))
		if b.SpecName != wantSpec || b.TestbedKey != wantTestbed {
			warnings = append(warnings, fmt.Sprintf("warning: %s is stored as testbed %q spec %q but holds testbed %q spec %q; the gate will not use it (move it to %s)",
				f, wantTestbed, wantSpec, b.TestbedKey, b.SpecName, gate.BaselinePath(filepath.Dir(filepath.Dir(f)), b.TestbedKey, b.SpecName)))
		}
		names := make([]string, len(b.Configs))
		for i, c := range b.Configs {
			names[i] = c.Name
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f, b.TestbedKey, b.SpecName, strings.Join(names, ","),
			b.Provenance.RecordedAt.Format("2006-01-02"), nonEmpty(b.Provenance.GitCommit))
	}
	tw.Flush()
	for _, m := range warnings {
		fmt.Fprintln(errW, m)
	}
	if bad > 0 {
		return withExitCode(2, fmt.Errorf("%d baseline file(s) are unreadable", bad))
	}
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := jsonEncoder(w)
	return enc.Encode(v)
}

// throughputMetrics are the trial metrics that are zero or negative only when a trial measured
// nothing.
var throughputMetrics = []string{"output_throughput", "request_throughput", "total_token_throughput"}

// trialMeasured refuses a trial that measured nothing: no completed request, or a throughput
// that is zero or negative.
func trialMeasured(t gate.Trial) error {
	if n, ok := t.Metrics["completed"]; ok && n <= 0 {
		return fmt.Errorf("completed is %v: no request completed", n)
	}
	for _, k := range throughputMetrics {
		if v, ok := t.Metrics[k]; ok && v <= 0 {
			return fmt.Errorf("%s is %v tok/s", k, v)
		}
	}
	return nil
}

// measurementsPassed refuses a config whose measurements (trials, numerics probe) did not pass
// in the run.
func measurementsPassed(run *gate.Run, config string) error {
	for _, ch := range run.Checks {
		if ch.Config == config && ch.Kind == gate.KindMeasurement && (ch.Status == gate.StatusFailed || ch.Status == gate.StatusError) {
			return fmt.Errorf("config %s: check %q is %s: %s", config, ch.Name, ch.Status, ch.Message)
		}
	}
	return nil
}
