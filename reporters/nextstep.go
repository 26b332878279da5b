package reporters

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/reckon-ci/reckon/gate"
)

// NextStep says what would decide an undecided check (inconclusive, no baseline, an input left
// out by the label filter), from the check's own statistics: for an inconclusive comparison the
// trials (or, when launches are the statistical unit, the launches) per side that would likely
// decide it; for a missing baseline how to record one. It returns "" for a decided check.
// Every report (terminal, summary.md, report.html) shows the same text.
func NextStep(c *gate.Check) string {
	if c == nil {
		return ""
	}
	switch c.Outcome {
	case "no_baseline":
		return "record a baseline on this testbed (reckon baseline record --from out/results.json), or judge against another config"
	case gate.OutcomePartial:
		return "widen --label-filter to select the configs this check compares"
	case "inconclusive":
	default:
		if c.Stat == nil || c.Stat.Outcome != gate.Undecided {
			return ""
		}
	}
	s := c.Stat
	if s == nil {
		if msg := strings.TrimSpace(c.Details); strings.Contains(msg, "more trial") {
			return fitMessage(msg, 200)
		}
		return "run more trials of its workload (the statistics recorded nothing more)"
	}
	if s.Launch != nil && s.Launch.Decide != "" {
		// Launches as the unit: the one plan the statistics made (the design that decides
		// min_effect at the check's power, from the noise the comparison used).
		return s.Launch.Decide
	}
	unit, have := "trial", min(s.NBase, s.NHead)
	if lh, ok := c.Metrics["launches_head"]; ok {
		unit = "launch"
		have = int(math.Min(lh, c.Metrics["launches_base"]))
	}
	units := unit + "s"
	if unit == "launch" {
		units = "launches"
	}
	field := "trials"
	if unit == "launch" {
		field = "launches"
	}
	switch {
	case s.MoreTrials > 0:
		n := s.MoreTrials
		word := unit
		if n != 1 {
			word = units
		}
		return fmt.Sprintf("about %d more %s per side would decide (workload %s: %d)", n, word, field, have+n)
	case s.MoreTrials < 0:
		return fmt.Sprintf("more than %d %s per side would be needed: the difference is smaller than the noise; set the check's min_effect or accept no change", s.MaxTrials, units)
	}
	so := ""
	if have > 0 {
		so = fmt.Sprintf(" (%d per side so far)", have)
	}
	if s.Reason != "" {
		return fmt.Sprintf("run more %s of its workload%s: %s", units, so, fitMessage(s.Reason, 200))
	}
	return fmt.Sprintf("run more %s of its workload%s", units, so)
}

// throughputMedian is a config's median of a metric over one workload's trials as the verdicts
// compute it: with several launches the median of the launch means (launches are the
// statistical unit), else the median of the trials. n says over what: "n=5" or "3 launches";
// vs are the trials' values. ok is false when no trial has the metric.
func throughputMedian(cfg *gate.Config, workload, key string) (m float64, n string, vs []float64, ok bool) {
	byLaunch := map[int][]float64{}
	for _, t := range cfg.Trials {
		if t.Workload != workload {
			continue
		}
		if v, has := t.Metrics[key]; has && finite(v) {
			byLaunch[t.Launch] = append(byLaunch[t.Launch], v)
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0, "", nil, false
	}
	if len(byLaunch) < 2 {
		m, _ = median(vs)
		return m, fmt.Sprintf("n=%d", len(vs)), vs, true
	}
	launches := make([]int, 0, len(byLaunch))
	for l := range byLaunch {
		launches = append(launches, l)
	}
	sort.Ints(launches)
	means := make([]float64, 0, len(launches))
	for _, l := range launches {
		sum := 0.0
		for _, v := range byLaunch[l] {
			sum += v
		}
		means = append(means, sum/float64(len(byLaunch[l])))
	}
	m, _ = median(means)
	return m, fmt.Sprintf("%d launches", len(means)), vs, true
}
