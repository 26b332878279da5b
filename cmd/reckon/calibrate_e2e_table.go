package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/gate"
)

// measuredNoise is the cell's noise as the gate measured it (RMS over its runs), falling back
// to the seeded level for a component not measured.
func (c *e2eCell) measuredNoise() gate.LaunchNoiseLevel {
	n := c.Noise
	if k := c.Null.WithinN + c.Slow.WithinN; k > 0 {
		n.Within = math.Sqrt((c.Null.WithinSq + c.Slow.WithinSq) / float64(k))
	}
	if k := c.Null.BetweenN + c.Slow.BetweenN; k > 0 {
		n.Between = math.Sqrt((c.Null.BetweenSq + c.Slow.BetweenSq) / float64(k))
	}
	return n
}

// addCount adds o's counts to c.
func (c *e2eCount) addCount(o e2eCount) {
	c.Runs += o.Runs
	c.Red += o.Red
	c.Inconclusive += o.Inconclusive
	c.Errors += o.Errors
	c.WithinSq += o.WithinSq
	c.WithinN += o.WithinN
	c.BetweenSq += o.BetweenSq
	c.BetweenN += o.BetweenN
	c.Seconds += o.Seconds
}

// e2eSaved is an --out directory's cells.json.
type e2eSaved struct {
	Config      e2eConfig `json:"config"`
	Cells       []e2eCell `json:"cells"`
	WallS       float64   `json:"wall_s"`
	Interrupted bool      `json:"interrupted"`
}

// mergeE2E joins the cells of earlier runs (each dir's cells.json) into one table's input: the
// first run's settings, its cells then every later run's, the sum of their wall times.
func mergeE2E(dirs []string) (e2eConfig, []e2eCell, time.Duration, bool, error) {
	var cfg e2eConfig
	var cells []e2eCell
	var wall float64
	interrupted := false
	for i, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, "cells.json"))
		if err != nil {
			return cfg, nil, 0, false, fmt.Errorf("--merge: %w", err)
		}
		var s e2eSaved
		if err := json.Unmarshal(data, &s); err != nil {
			return cfg, nil, 0, false, fmt.Errorf("--merge: %s: %w", d, err)
		}
		if i == 0 {
			cfg = s.Config
		} else if s.Config.Effect != cfg.Effect || s.Config.Alpha != cfg.Alpha || s.Config.MinEffect != cfg.MinEffect || s.Config.Prior != cfg.Prior || s.Config.Model != cfg.Model {
			return cfg, nil, 0, false, fmt.Errorf("--merge: %s was run with other settings (effect, alpha, min effect, prior or model) than %s", d, dirs[0])
		}
		cfg.Parallel = max(cfg.Parallel, s.Config.Parallel)
	next:
		for _, c := range s.Cells {
			for j := range cells {
				if cells[j].Noise == c.Noise && cells[j].Design == c.Design {
					cells[j].Null.addCount(c.Null)
					cells[j].Slow.addCount(c.Slow)
					continue next
				}
			}
			cells = append(cells, c)
		}
		wall += s.WallS
		interrupted = interrupted || s.Interrupted
	}
	sort.SliceStable(cells, func(i, j int) bool {
		a, b := cells[i], cells[j]
		if a.Noise != b.Noise {
			return a.Noise.Between < b.Noise.Between || a.Noise.Between == b.Noise.Between && a.Noise.Within < b.Noise.Within
		}
		return a.Design.Launches*a.Design.Trials < b.Design.Launches*b.Design.Trials
	})
	return cfg, cells, time.Duration(wall * float64(time.Second)), interrupted, nil
}

// simulateE2ECells fills each cell's simulation row: the same noise, design, effect, alpha, min
// effect and prior, judged by gate.CompareLaunches on simulated launches.
func simulateE2ECells(ctx context.Context, cfg e2eConfig, cells []e2eCell, nullReps int) {
	sc := gate.DefaultLaunchCalibrationConfig()
	sc.Noise, sc.Designs = nil, nil
	for _, c := range cells {
		sc.Noise = appendNew(sc.Noise, c.Noise)
		sc.Designs = appendNew(sc.Designs, c.Design)
	}
	sc.Effect, sc.NullReps, sc.Reps, sc.Seed = cfg.Effect, nullReps, max(1, nullReps/4), cfg.Seed
	sc.Opts.Alpha, sc.Opts.MinEffect = cfg.Alpha, cfg.MinEffect
	sc.Prior = gate.PriorLaunchNoise(cfg.Prior, "--prior")
	rows, err := gate.CalibrateLaunches(ctx, sc)
	if err != nil {
		return
	}
	for i := range cells {
		for k := range rows {
			if rows[k].Noise == cells[i].Noise && rows[k].Design == cells[i].Design {
				cells[i].Sim, cells[i].SimReps = &rows[k], nullReps
			}
		}
		if cells[i].Null.Runs+cells[i].Slow.Runs == 0 {
			continue
		}
		mc := sc
		mc.Noise, mc.Designs = []gate.LaunchNoiseLevel{cells[i].measuredNoise()}, []gate.LaunchDesign{cells[i].Design}
		if r, err := gate.CalibrateLaunches(ctx, mc); err == nil && len(r) == 1 {
			cells[i].SimMeasured = &r[0]
		}
	}
}

func appendNew[T comparable](xs []T, x T) []T {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}

func rms(sq float64, n int) string {
	if n == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*math.Sqrt(sq/float64(n)))
}

// e2eMarkdown renders the cells as a markdown table with, per noise level, the design that
// reached the aims in the runs made.
func e2eMarkdown(cfg e2eConfig, cells []e2eCell, wall time.Duration, simReps int, interrupted bool) string {
	var b strings.Builder
	runs, errs, perCell := 0, 0, 0
	for _, c := range cells {
		runs += c.Null.Runs + c.Slow.Runs
		errs += c.Null.Errors + c.Slow.Errors
		perCell = max(perCell, c.Null.Runs+c.Null.Errors, c.Slow.Runs+c.Slow.Errors)
	}
	fmt.Fprintf(&b, "End-to-end calibration: `reckon gate` on the reference engine (device clock: modelled %s at tp 1 on an H100, seeded noise), up to %d no-change and %d slowed (head %g%% slower: `--fault-slowdown %.5g`) runs per cell; a trial is %d requests x %d output tokens, each launch after %d warm-up request(s); throughput check alpha %g, min_effect %g%%, one-launch designs use the between-launch prior %g%%. %d gate runs (%d without a verdict) in %s wall, %d at a time.",
		cfg.Model, perCell, perCell, 100*cfg.Effect, 1/(1-cfg.Effect), e2ePrompts, e2eOutputLen, cfg.Warmup, cfg.Alpha, 100*cfg.MinEffect, 100*cfg.Prior,
		runs, errs, wall.Round(time.Second), cfg.Parallel)
	if interrupted {
		b.WriteString(" **Interrupted: partial counts.**")
	}
	b.WriteString("\nRates: count, then the 95% Wilson interval; `sim` is `reckon calibrate launches`' rate for the same cell")
	for _, c := range cells {
		if c.SimReps > 0 {
			simReps = c.SimReps
		}
	}
	if simReps > 0 {
		fmt.Fprintf(&b, " (%d no-change, %d slowed simulated comparisons)", simReps, max(1, simReps/4))
	}
	b.WriteString("; measured CVs are the gate's estimates (RMS over runs; between-launch only where a side has launches to measure it); `sim @ measured` is the simulation at the measured noise (the seeded between-launch CV where none was measured).\n\n")
	b.WriteString("| between / within CV | measured within / between | launches x trials per side | false alarms | sim | sim @ measured | no-change inconclusive | detect | sim | sim @ measured | slowed inconclusive |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range cells {
		simFA, simDet, mFA, mDet := "", "", "", ""
		if c.Sim != nil {
			simFA, simDet = fmt.Sprintf("%.2f%%", 100*c.Sim.FalseAlarm), fmt.Sprintf("%.1f%%", 100*c.Sim.Detect)
		}
		if c.SimMeasured != nil {
			mFA, mDet = fmt.Sprintf("%.2f%%", 100*c.SimMeasured.FalseAlarm), fmt.Sprintf("%.1f%%", 100*c.SimMeasured.Detect)
		}
		d := c.Design.String()
		if c.Design.Launches == 1 {
			d += fmt.Sprintf(" (prior %g%%)", 100*cfg.Prior)
		}
		fmt.Fprintf(&b, "| %.4g%% / %.4g%% | %s / %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", 100*c.Noise.Between, 100*c.Noise.Within,
			rms(c.Null.WithinSq+c.Slow.WithinSq, c.Null.WithinN+c.Slow.WithinN), rms(c.Null.BetweenSq+c.Slow.BetweenSq, c.Null.BetweenN+c.Slow.BetweenN),
			d, gate.RateWithInterval(c.Null.Red, c.Null.Runs), simFA, mFA, gate.RateWithInterval(c.Null.Inconclusive, c.Null.Runs),
			gate.RateWithInterval(c.Slow.Red, c.Slow.Runs), simDet, mDet, gate.RateWithInterval(c.Slow.Inconclusive, c.Slow.Runs))
	}
	b.WriteString("\n")
	seen := map[gate.LaunchNoiseLevel]bool{}
	for _, c := range cells {
		if seen[c.Noise] {
			continue
		}
		seen[c.Noise] = true
		var best, simBest *e2eCell
		for i := range cells {
			o := &cells[i]
			if o.Noise != c.Noise {
				continue
			}
			size := o.Design.Launches * o.Design.Trials
			if o.Null.Runs > 0 && o.Slow.Runs > 0 && float64(o.Null.Red) <= 0.01*float64(o.Null.Runs) && float64(o.Slow.Red) >= 0.95*float64(o.Slow.Runs) &&
				(best == nil || size < best.Design.Launches*best.Design.Trials) {
				best = o
			}
			if o.Sim != nil && o.Sim.Meets() && (simBest == nil || size < simBest.Design.Launches*simBest.Design.Trials) {
				simBest = o
			}
		}
		fmt.Fprintf(&b, "- between %.4g%% / within %.4g%%: ", 100*c.Noise.Between, 100*c.Noise.Within)
		if best != nil {
			_, faHi := gate.Wilson(best.Null.Red, best.Null.Runs)
			detLo, _ := gate.Wilson(best.Slow.Red, best.Slow.Runs)
			fmt.Fprintf(&b, "**%s** reached false alarms <= 1%% and detection >= 95%% in the runs made (false alarms %d/%d, detection %d/%d); with %d runs that bounds false alarms by %.1f%% and detection from below by %.1f%% (95%%)",
				best.Design, best.Null.Red, best.Null.Runs, best.Slow.Red, best.Slow.Runs, best.Null.Runs, 100*faHi, 100*detLo)
		} else {
			b.WriteString("no design run reached false alarms <= 1% and detection >= 95%")
		}
		if simBest != nil {
			fmt.Fprintf(&b, "; the simulation's cheapest design of those run that meets the aims: %s", simBest.Design)
		} else if c.Sim != nil || simReps > 0 {
			b.WriteString("; in the simulation none of these designs meets them (docs/statistics.md's launch calibration names what does)")
		}
		b.WriteString("\n")
	}
	return b.String()
}
