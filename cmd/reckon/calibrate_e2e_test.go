package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/gate"
)

// The generated specs are valid gate specs: one launch (fixed trials) and several (launches).
func TestE2ESpecIsValid(t *testing.T) {
	dir := t.TempDir()
	cfg := e2eConfig{Effect: 0.05, Alpha: 0.01, MinEffect: 0.02, Prior: 0.03, Model: "llama-3.1-70b", Warmup: 1,
		Refengine: "/nonexistent/refengine", TinyModel: "/nonexistent/tiny.json"}
	for _, d := range []gate.LaunchDesign{{Launches: 1, Trials: 5}, {Launches: 4, Trials: 3}} {
		for _, slow := range []bool{false, true} {
			cell := e2eCell{Noise: gate.LaunchNoiseLevel{Between: 0.02, Within: 0.01}, Design: d}
			text := e2eSpec(cfg, cell, 7, filepath.Join(dir, "counter"), slow)
			p := filepath.Join(dir, "spec.yaml")
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			r := checkSpecFile(p)
			if !r.Valid {
				t.Fatalf("%s slow=%v: %v\n%s", d, slow, r.Errors, text)
			}
			for _, want := range []string{`"--clock-launch-cv", "0.02"`, `"--clock-step-cv", "0.04"`, `"--clock-seed", "7"`, "min_effect: 2%", "alpha: 0.01"} {
				if !strings.Contains(text, want) {
					t.Errorf("spec lacks %s:\n%s", want, text)
				}
			}
			if strings.Contains(text, "--fault-slowdown") != slow || slow && !strings.Contains(text, `"1.05263"`) {
				t.Errorf("slow=%v:\n%s", slow, text)
			}
			if strings.Contains(text, "launches:") != (d.Launches > 1) {
				t.Errorf("launches %d:\n%s", d.Launches, text)
			}
		}
	}
}

func TestE2EVerdictAndTable(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "results.json")
	res := `{"checks": [{"kind": "measurement", "status": "passed"},
	  {"kind": "throughput", "status": "failed", "outcome": "fail", "stat": {"launch": {"launches_base": 4, "launches_head": 4,
	   "base": {"launches": 4, "trials": 12, "within_cv": 0.011, "within_df": 8, "between_cv": 0.02, "between_df": 3},
	   "head": {"launches": 4, "trials": 12, "within_cv": 0.009, "within_df": 8, "between_cv": "NaN", "between_df": 3}}}}]}`
	if err := os.WriteFile(p, []byte(res), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := readE2EVerdict(p)
	if err != nil || v.Status != "failed" || v.Launch == nil || v.Launch.Base.WithinCV != 0.011 {
		t.Fatalf("verdict %+v, %v", v, err)
	}
	cell := e2eCell{Noise: gate.LaunchNoiseLevel{Between: 0.01, Within: 0.01}, Design: gate.LaunchDesign{Launches: 4, Trials: 3}}
	for i := 0; i < 60; i++ {
		cell.Null.add(e2eVerdict{Status: "passed", Outcome: "pass"})
		cell.Slow.add(v)
	}
	cell.Null.Inconclusive = 0
	cell.Slow.add(e2eVerdict{Status: "skipped", Outcome: "inconclusive"})
	cell.Sim = &gate.LaunchCalibrationRow{FalseAlarm: 0.0023, Detect: 0.978}
	cfg := e2eConfig{Runs: 60, Effect: 0.05, Alpha: 0.01, MinEffect: 0.02, Prior: 0.03, Model: "llama-3.1-70b", Warmup: 1, Parallel: 4}
	md := e2eMarkdown(cfg, []e2eCell{cell}, 90*time.Second, 4000, false)
	for _, want := range []string{
		"| 1% / 1% | 1.0% / 2.0% | 4 x 3 | 0/60 (0.0–6.0%) | 0.23% |  | 0/60 (0.0–6.0%) | 60/61 (91.3–99.7%) | 97.8% |  | 1/61 (0.3–8.7%) |",
		"**4 x 3** reached false alarms <= 1% and detection >= 95% in the runs made (false alarms 0/60, detection 60/61); with 60 runs that bounds false alarms by 6.0%",
		"the simulation's cheapest design of those run that meets the aims: 4 x 3",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
	// The simulation at the measured noise: within 1.0% (both sides' RMS), between 2.0%.
	cells := []e2eCell{cell}
	simulateE2ECells(context.Background(), cfg, cells, 200)
	if m := cells[0].SimMeasured; m == nil || math.Abs(m.Noise.Within-0.01) > 1e-3 || math.Abs(m.Noise.Between-0.02) > 1e-9 || cells[0].Sim == nil {
		t.Errorf("simulation at the measured noise: %+v", m)
	}
	// --merge sums the runs of the same cell from several directories.
	for i, d := range []string{filepath.Join(dir, "a"), filepath.Join(dir, "b")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(e2eSaved{Config: cfg, Cells: []e2eCell{cell}, WallS: float64(10 * (i + 1))})
		if err := os.WriteFile(filepath.Join(d, "cells.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, merged, wall, _, err := mergeE2E([]string{filepath.Join(dir, "a"), filepath.Join(dir, "b")})
	if err != nil || len(merged) != 1 || merged[0].Null.Runs != 120 || merged[0].Slow.Red != 120 || wall != 30*time.Second {
		t.Errorf("merge: %v, %+v, %s", err, merged, wall)
	}
}
