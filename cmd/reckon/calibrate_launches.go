package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/gate"
)

const (
	launchCalBegin = "<!-- launch-calibration:begin (reckon calibrate launches --write-docs) -->"
	launchCalEnd   = "<!-- launch-calibration:end -->"
)

func newCalibrateLaunchesCmd() *cobra.Command {
	var (
		reps, nullReps int
		seed           uint64
		cvs, designs   string
		effect, prior  float64
		alpha, minEff  float64
		asJSON         bool
		writeDocs      string
	)
	cmd := &cobra.Command{
		Use:   "launches [--cv LIST] [--designs LIST] [--effect PCT] [--write-docs FILE]",
		Short: "False alarms and detection with launches as the unit: simulated launches x trials",
		Long: `launches simulates same-run A/B comparisons in which every launch of the engine has its own
random effect (between-launch CV) and every trial its own noise (within-launch CV), and judges them
exactly as the gate does (gate.CompareLaunches: launches as the unit, the prior for one-launch
designs). For each noise level and design (launches x trials per side) it reports false alarms under
no change and detection of a true slowdown, and names the cheapest design that reaches false alarms
<= 1% and detection >= 95%. --write-docs replaces the table between the launch-calibration markers
of that file (docs/statistics.md).`,
		Example: `  reckon calibrate launches
  reckon calibrate launches --cv 2/5 --designs 1x5,5x3,10x3
  reckon calibrate launches --write-docs docs/statistics.md`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := gate.DefaultLaunchCalibrationConfig()
			cfg.Reps, cfg.NullReps, cfg.Seed, cfg.Effect = reps, nullReps, seed, effect/100
			cfg.Opts.Alpha, cfg.Opts.MinEffect = alpha, minEff/100
			if nullReps < 1000 || reps < 1 {
				return withExitCode(2, fmt.Errorf("--null-reps %d, --reps %d: expected at least 1000 and 1", nullReps, reps))
			}
			var err error
			if cfg.Noise, err = noiseLevels(cvs); err != nil {
				return withExitCode(2, err)
			}
			if cfg.Designs, err = launchDesigns(designs); err != nil {
				return withExitCode(2, err)
			}
			if prior > 0 {
				cfg.Prior = gate.PriorLaunchNoise(prior/100, "--prior")
			}
			start := time.Now()
			rows, err := gate.CalibrateLaunches(cmd.Context(), cfg)
			if err != nil {
				return withExitCode(2, err)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"config": cfg, "rows": rows})
			}
			pr := cfg.Prior
			if pr == (gate.LaunchNoise{}) {
				pr = gate.PriorLaunchNoise(0, "")
			}
			header := fmt.Sprintf("Launch calibration: %d no-change and %d regressed (%g%% slower) same-run A/B comparisons per cell, seed %d, alpha %g, min effect %g%%; launches x trials per side; one-launch designs use the between-launch prior %g%%.\n\n",
				cfg.NullReps, cfg.Reps, effect, cfg.Seed, alpha, minEff, 100*pr.CV)
			out := header + gate.LaunchCalibrationMarkdown(rows, cfg.Effect, cfg.Prior)
			return publishCalibration(cmd, out, start, writeDocs, launchCalBegin, launchCalEnd)
		},
	}
	f := cmd.Flags()
	f.IntVar(&reps, "reps", 2000, "simulated comparisons per cell with the true slowdown")
	f.IntVar(&nullReps, "null-reps", 10000, "simulated no-change comparisons per cell (at least 1000)")
	f.Uint64Var(&seed, "seed", 1, "random seed (results are deterministic for a seed)")
	f.StringVar(&cvs, "cv", "1,2,5", `noise levels in percent: "B" (between = within) or "B/W", comma-separated`)
	f.StringVar(&designs, "designs", "1x5,1x10,3x3,3x5,4x3,5x3,5x5,8x3,10x3,20x3,40x3", "designs: launches x trials per side, comma-separated")
	f.Float64Var(&effect, "effect", 5, "true slowdown to detect, in percent")
	f.Float64Var(&prior, "prior", 0, "between-launch CV prior in percent for one-launch designs (0: the gate's default)")
	f.Float64Var(&alpha, "alpha", 0.01, "false-alarm bound (one-sided)")
	f.Float64Var(&minEff, "min-effect", 2, "minimum effect in percent")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.StringVar(&writeDocs, "write-docs", "", "replace the launch-calibration table between its markers in this markdown file")
	return cmd
}

// noiseLevels parses "1,2,5" or "2/1,5/2" (between/within CV in percent).
func noiseLevels(s string) ([]gate.LaunchNoiseLevel, error) {
	var out []gate.LaunchNoiseLevel
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		bw := strings.SplitN(p, "/", 2)
		var vals [2]float64
		for i := range vals {
			x := bw[min(i, len(bw)-1)]
			v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(x), "%"), 64)
			if err != nil || !(v > 0 && v < 100) {
				return nil, fmt.Errorf("--cv: %q is not a CV in percent (B or B/W)", p)
			}
			vals[i] = v / 100
		}
		out = append(out, gate.LaunchNoiseLevel{Between: vals[0], Within: vals[1]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--cv: empty list")
	}
	return out, nil
}

// launchDesigns parses "1x5,5x3".
func launchDesigns(s string) ([]gate.LaunchDesign, error) {
	var out []gate.LaunchDesign
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		k, n, ok := strings.Cut(p, "x")
		kv, err1 := strconv.Atoi(strings.TrimSpace(k))
		nv, err2 := strconv.Atoi(strings.TrimSpace(n))
		if !ok || err1 != nil || err2 != nil || kv < 1 || nv < 1 || kv > 200 || nv > 100 {
			return nil, fmt.Errorf("--designs: %q is not LAUNCHESxTRIALS (1..200 launches, 1..100 trials)", p)
		}
		out = append(out, gate.LaunchDesign{Launches: kv, Trials: nv})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--designs: empty list")
	}
	return out, nil
}
