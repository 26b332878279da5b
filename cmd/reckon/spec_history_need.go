package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/history"
	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/suites"
)

// specHistoryTimeout bounds spec check's reading of the history store.
const specHistoryTimeout = 2 * time.Minute

// historyNeeds plans every statistical check of s from the history store o.history, on one
// testbed (o.testbed) or on every testbed with runs of the spec: a check against a config or a
// baseline from the launch noise the stored runs teach (suites.LearnedNoise, what the gate pools
// with a run's own launches), a check against history by replaying the nightly detector with the
// newest stored night as tonight (the sensitivity a healthy night would show).
func historyNeeds(s *spec.Spec, o specNeedOptions) ([]specNeed, []string) {
	ctx, cancel := context.WithTimeout(context.Background(), specHistoryTimeout)
	defer cancel()
	st, err := history.Open(ctx, o.history)
	if err != nil {
		return nil, []string{fmt.Sprintf("history %s: %v", o.history, err)}
	}
	defer st.Close()
	testbeds := []string{o.testbed}
	if o.testbed == "" {
		runs, err := st.Runs(ctx, history.RunFilter{Spec: s.Name})
		if err != nil {
			return nil, []string{fmt.Sprintf("history %s: %v", o.history, err)}
		}
		seen := map[string]bool{}
		testbeds = testbeds[:0]
		for _, r := range runs {
			if !seen[r.TestbedKey] {
				seen[r.TestbedKey] = true
				testbeds = append(testbeds, r.TestbedKey)
			}
		}
		sort.Strings(testbeds)
		if len(testbeds) == 0 {
			return nil, []string{fmt.Sprintf("the history holds no run of spec %s: run the nightly's bootstrap or the pre-merge's calibration first (docs/ci.md, \"Verdicts a GPU CI can afford\")", s.Name)}
		}
	}
	prior, perr := gate.TestbedPrior(0)
	var notes []string
	if perr != nil {
		notes = append(notes, perr.Error())
	}
	src := &historySource{dsn: o.history, store: st}
	var out []specNeed
	for _, tb := range testbeds {
		for _, c := range s.StatisticalChecks() {
			p := c.Stat()
			if p.Against == spec.AgainstHistory {
				notes = append(notes, fmt.Sprintf("testbed %s: %s: %s", tb, c.Name, detectorNeed(ctx, src, s, c, tb, prior)))
				continue
			}
			n, note := planFromHistory(ctx, src, s, c, tb)
			if note != "" {
				notes = append(notes, fmt.Sprintf("testbed %s: %s: %s", tb, c.Name, note))
				continue
			}
			out = append(out, specNeed{Check: c.Name, Testbed: tb, Baseline: "history", Need: n})
		}
	}
	return out, notes
}

// planFromHistory plans check c (against a config or a baseline) from the launch noise the
// history's runs of its configs teach on testbed tb.
func planFromHistory(ctx context.Context, src suites.HistorySource, s *spec.Spec, c *spec.Check, tb string) (gate.DesignNeed, string) {
	p := c.Stat()
	opts := suites.StatOptionsFor(p)
	k, n := 1, 5
	if w, ok := s.Workload(p.Workload); ok {
		k, n = max(1, w.LaunchCount()), max(1, w.Trials)
	}
	configs := []string{p.Config}
	if p.AgainstConfig != "" {
		configs = append(configs, p.AgainstConfig)
	}
	var ests []gate.NoiseEstimate
	var from []string
	var wSS float64
	wDF := 0
	for _, name := range configs {
		w, err := src.Window(ctx, suites.HistoryQuery{Testbed: tb, Spec: s.Name, Config: name, Workload: p.Workload, Metric: p.Metric, MinRuns: 1, Stat: opts})
		if err != nil || w == nil {
			continue
		}
		e, desc, ok := suites.LearnedNoise(w, name)
		if !ok {
			continue
		}
		ests = append(ests, e)
		from = append(from, desc)
		if e.WithinDF > 0 && !math.IsNaN(e.WithinCV) {
			wSS += float64(e.WithinDF) * e.WithinCV * e.WithinCV
			wDF += e.WithinDF
		}
	}
	between, ok := gate.PoolNoise("measured by the history of "+strings.Join(from, ", "), ests...)
	if !ok {
		return gate.DesignNeed{}, fmt.Sprintf("the history has too few launches of %v in workload %s to measure their noise (a run with several launches, or %d one-launch runs)", configs, p.Workload, gate.MinLaunchesToMeasure)
	}
	within := math.NaN()
	if wDF > 0 {
		within = math.Sqrt(wSS / float64(wDF))
	}
	return gate.NeedForMinEffect(between, within, k, n, opts), ""
}

// detectorNeed replays the nightly detector of check c (against history) over its stored nights
// on testbed tb, the newest as tonight, and says whether a healthy night would show the check's
// power at min_effect.
func detectorNeed(ctx context.Context, src suites.HistorySource, s *spec.Spec, c *spec.Check, tb string, prior gate.LaunchNoise) string {
	p := c.Stat()
	opts := suites.StatOptionsFor(p)
	w, err := src.Window(ctx, suites.HistoryQuery{Testbed: tb, Spec: s.Name, Config: p.Config, Workload: p.Workload, Metric: p.Metric, MinRuns: p.HistoryRuns + 1, Stat: opts})
	if errors.Is(err, suites.ErrNoHistory) {
		return fmt.Sprintf("%v: a healthy night is no_baseline until the history holds %d nights of the current level and the newest to replay (bootstrap: docs/history.md)", err, p.HistoryRuns+1)
	}
	if err != nil || w == nil || len(w.Groups) < 2 {
		return fmt.Sprintf("the history could not be read for it: %v", err)
	}
	m, ok := gate.MetricFor(p.Metric)
	if !ok {
		return fmt.Sprintf("metric %q has no direction to detect a drop in", p.Metric)
	}
	last := len(w.Groups) - 1
	if len(w.GroupRun) == len(w.Groups) {
		for last > 0 && w.GroupRun[last-1] == w.GroupRun[len(w.Groups)-1] {
			last--
		}
	}
	runs, head := w.Groups[:last], w.Groups[last:]
	open := min(len(runs), w.OpenFrom)
	if w.Open == "" {
		open = len(runs)
	}
	r, _, _ := gate.CompareNights(runs, open, head, m, opts, prior, p.HistoryRuns)
	pct := func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }
	switch {
	case w.Open != "":
		return fmt.Sprintf("an open regression since %s: red every night until fixed or accepted (reckon history accept)", w.Open)
	case r.Detectable > 0 && r.Detectable <= opts.MinEffect:
		return fmt.Sprintf("the nightly detector over %d stored nights (the newest replayed as tonight) would find a drop of %s or more with %.0f%% power: decides min_effect %s", len(runs), pct(r.Detectable), 100*opts.Power, pct(opts.MinEffect))
	case r.Detectable > 0:
		return fmt.Sprintf("the nightly detector over %d stored nights (the newest replayed as tonight) would find only a drop of %s or more with %.0f%% power: a healthy night is inconclusive at min_effect %s until more nights are stored (or a larger min_effect)", len(runs), pct(r.Detectable), 100*opts.Power, pct(opts.MinEffect))
	default:
		return fmt.Sprintf("the nightly detector over %d stored nights: %s", len(runs), r.Outcome)
	}
}
