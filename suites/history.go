package suites

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// HistoryQuery names the series a check `against: history` is judged against.
type HistoryQuery struct {
	Testbed, Spec, Config, Workload, Metric string
	// MinRuns is the fewest runs since the series' last change point the window must hold.
	MinRuns int
	// Stat is the check's statistics, with which the store replays the nightly detector over
	// the stored runs (gate.OpenRegression) to find an open regression.
	Stat gate.StatOptions
}

// HistoryWindow is the comparison a history store hands the gate: the trials of the runs since
// the series' last change point (the newest of them), and what they are.
type HistoryWindow struct {
	Samples []float64
	// Groups holds the same samples by run (each run is a launch of the config); nil when the
	// source does not tell, and then the history measures no between-launch variation.
	// Groups[:OpenFrom] is the reference (the series' current level) and Groups[OpenFrom:] the
	// runs since an open regression (none when OpenFrom == len(Groups)).
	Groups   [][]float64
	OpenFrom int
	// GroupRun is the run of each group (nil: each group its own run).
	GroupRun []int
	// Open names the open regression's change point ("" when none), OpenCommit its first
	// run's commit.
	Open, OpenCommit string
	// Runs is how many runs the window holds.
	Runs int
	// Describe says which runs, e.g. "12 runs 2026-11-20..2026-12-01, since the change point at ...".
	Describe string
	// LastCommit is the commit of the newest run in the window: a regression tonight came in
	// LastCommit..(tonight's commit).
	LastCommit string
}

// HistorySource is the results history (package history, wired in by cmd/reckon). Window
// returns ErrNoHistory (wrapped) when the series has too few runs since its last change point.
type HistorySource interface {
	Window(ctx context.Context, q HistoryQuery) (*HistoryWindow, error)
}

// ErrNoHistory marks a series with too few stored runs: the check's outcome is no_baseline.
var ErrNoHistory = errors.New("not enough history")

// historyTimeout bounds one window query.
const historyTimeout = 60 * time.Second

// historySamples returns the window's trials for a check against history, remembering the
// window for the verdict's annotation.
func (fw *framework) historySamples(c *spec.Check) ([]float64, error) {
	p := c.Stat()
	if fw.opts.History == nil {
		return nil, fmt.Errorf("%w: %s: check %q is against: history, but no history store is configured (reckon gate --history DSN, or RECKON_HISTORY)", ErrNoHistory, fw.spec.File, c.Name)
	}
	ctx := fw.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, historyTimeout)
	defer cancel()
	w, err := fw.opts.History.Window(ctx, HistoryQuery{Testbed: fw.testbedKey, Spec: fw.spec.Name, Config: p.Config, Workload: p.Workload, Metric: p.Metric, MinRuns: p.HistoryRuns, Stat: fw.statOptions(c)})
	if err != nil {
		return nil, err
	}
	if len(w.Samples) == 0 {
		return nil, fmt.Errorf("%w: history of %s/%s/%s on testbed %s holds no samples", ErrNoHistory, p.Config, p.Workload, p.Metric, fw.testbedKey)
	}
	fw.mu.Lock()
	if fw.historyWindows == nil {
		fw.historyWindows = map[string]*HistoryWindow{}
	}
	fw.historyWindows[c.Name] = w
	fw.mu.Unlock()
	return w.Samples, nil
}

// historyGroups are the window's samples by run (launch) for a check against history, or the
// whole window as one launch when the source does not tell.
func (fw *framework) historyGroups(c *spec.Check) [][]float64 {
	fw.mu.Lock()
	w := fw.historyWindows[c.Name]
	fw.mu.Unlock()
	if w == nil {
		return nil
	}
	if len(w.Groups) > 0 {
		return w.Groups
	}
	return [][]float64{w.Samples}
}

// historyNoise is the between-launch variation of config's series (the check's workload and
// metric) in the history, for a check not judged against history (LearnedNoise). ok is false
// when the store has no such series or fails: the check then uses another source.
func (fw *framework) historyNoise(c *spec.Check, config string) (gate.NoiseEstimate, string, bool) {
	p := c.Stat()
	ctx := fw.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, historyTimeout)
	defer cancel()
	w, err := fw.opts.History.Window(ctx, HistoryQuery{Testbed: fw.testbedKey, Spec: fw.spec.Name, Config: config, Workload: p.Workload, Metric: p.Metric,
		MinRuns: 1, Stat: fw.statOptions(c)})
	if err != nil || w == nil {
		return gate.NoiseEstimate{}, "", false
	}
	return LearnedNoise(w, config)
}

// LearnedNoise is the launch noise a history window of config's series teaches: where the
// stored runs have several launches, the spread of launch means within each run, pooled over
// runs (a level that moves between runs, a pre-merge's base commit, does not count as noise),
// with the within-launch spread pooled likewise; else the spread of the one-launch runs of the
// current level (its reference). The runs since an open regression are left out. ok is false
// when the window measures neither.
func LearnedNoise(w *HistoryWindow, config string) (gate.NoiseEstimate, string, bool) {
	ref := w.Groups
	if w.OpenFrom > 0 && w.OpenFrom <= len(ref) {
		ref = ref[:w.OpenFrom]
	}
	byRun := map[int][][]float64{}
	multi := false
	for i, g := range ref {
		r := i
		if i < len(w.GroupRun) {
			r = w.GroupRun[i]
		}
		byRun[r] = append(byRun[r], g)
		multi = multi || len(byRun[r]) > 1
	}
	if multi {
		var es []gate.NoiseEstimate
		var wSS float64
		wDF := 0
		for _, gs := range byRun {
			if len(gs) > 1 {
				e := gate.EstimateNoise(gs)
				es = append(es, e)
				if e.WithinDF > 0 && !math.IsNaN(e.WithinCV) {
					wSS += float64(e.WithinDF) * e.WithinCV * e.WithinCV
					wDF += e.WithinDF
				}
			}
		}
		n, ok := gate.PoolNoise("", es...)
		if !ok {
			return gate.NoiseEstimate{}, "", false
		}
		within := math.NaN()
		if wDF > 0 {
			within = math.Sqrt(wSS / float64(wDF))
		}
		return gate.NoiseEstimate{BetweenCV: n.CV, BetweenDF: int(n.DF), WithinCV: within, WithinDF: wDF},
			fmt.Sprintf("%s: launches within each of %d runs", config, len(es)), true
	}
	if len(ref) < gate.MinLaunchesToMeasure {
		return gate.NoiseEstimate{}, "", false
	}
	return gate.EstimateNoise(ref), fmt.Sprintf("%s: %d one-launch runs", config, len(ref)), true
}

// annotateHistory adds the window to a verdict against history, and names a regression at
// tonight's run as a new change point with its commit range.
func (fw *framework) annotateHistory(c *spec.Check, v *gate.Verdict) {
	p := c.Stat()
	if p.Against != spec.AgainstHistory {
		return
	}
	fw.mu.Lock()
	w := fw.historyWindows[c.Name]
	fw.mu.Unlock()
	if w == nil {
		return
	}
	fw.mu.Lock()
	note, span := fw.nightsNotes[c.Name], fw.nightsSpan[c.Name]
	fw.mu.Unlock()
	switch {
	case v.Outcome == gate.Fail && w.Open != "":
		v.Message += fmt.Sprintf("; open regression since %s, not accepted (reckon history accept --config %s --from %s --reason ...)", w.Open, p.Config, shortSHA(w.OpenCommit))
	case v.Outcome == gate.Fail && span <= 1:
		v.Message += fmt.Sprintf("; change point at tonight's run (%s..%s)", shortSHA(w.LastCommit), shortSHA(fw.opts.GitCommit))
	case v.Outcome == gate.Fail:
		v.Message += fmt.Sprintf("; regression over the last %d nights, tonight's run included (last stored run %s, tonight %s)", span, shortSHA(w.LastCommit), shortSHA(fw.opts.GitCommit))
	}
	if v.Details != "" {
		v.Details += "\n"
	}
	if note != "" {
		v.Details += "nightly detector: " + note + "\n"
	}
	v.Details += "history window: " + w.Describe
	if v.Metrics == nil {
		v.Metrics = map[string]float64{}
	}
	v.Metrics["history_runs"] = float64(w.Runs)
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

// compareNights is the nightly detector (gate.CompareNights) of a check against history over its
// window: tonight's launches (head) against the runs of the window.
func (fw *framework) compareNights(c *spec.Check, head [][]float64, m gate.Metric, opts gate.StatOptions, prior gate.LaunchNoise) gate.StatResult {
	fw.mu.Lock()
	w := fw.historyWindows[c.Name]
	fw.mu.Unlock()
	groups := fw.historyGroups(c)
	open := len(groups)
	if w != nil && w.Open != "" {
		open = w.OpenFrom
	}
	r, note, span := gate.CompareNights(groups, open, head, m, opts, prior, c.Stat().HistoryRuns)
	fw.setNightsNote(c, note)
	fw.mu.Lock()
	fw.nightsSpan[c.Name] = span
	fw.mu.Unlock()
	return r
}

// setNightsNote keeps what the nightly detector tested, for the verdict's details.
func (fw *framework) setNightsNote(c *spec.Check, note string) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.nightsNotes == nil {
		fw.nightsNotes, fw.nightsSpan = map[string]string{}, map[string]int{}
	}
	fw.nightsNotes[c.Name] = note
}
