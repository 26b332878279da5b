package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/atomicfile"
)

func init() {
	c := newCalibrateCmd()
	c.AddCommand(newCalibrateNumericsCmd(), newCalibrateLaunchesCmd(), newCalibrateE2ECmd())
	rootCmd.AddCommand(c)
}

func newCalibrateCmd() *cobra.Command {
	var (
		reps, nullReps       int
		storedN              int
		seed                 uint64
		cvs, trials, effects string
		looks                string
		alpha, minEffect     float64
		asJSON               bool
		writeDocs            string
		samples              []string
		metric, samplesLabel string
	)
	cmd := &cobra.Command{
		Use:   "calibrate [--reps N] [--cv LIST] [--trials LIST] [--effects LIST] [--metric M] [--write-docs FILE] [TRIAL-FILE...]",
		Short: "Measure the gate's false-alarm and detection rates on simulated trials",
		Long: `calibrate simulates comparisons with known truth and judges them exactly as the gate does: trials
with log-normal noise at each CV (and, when trial files are given, resampled from their measured
values of --metric), with no change
(false alarms) and with true throughput regressions (detection), for fixed trial counts per side
and for the sequential plan (which adds trials while inconclusive). It prints a markdown table;
--write-docs replaces the table between the calibration markers in that file (docs/statistics.md).`,
		Example: `  reckon calibrate
  reckon calibrate --reps 20000 --write-docs docs/statistics.md
  reckon calibrate --metric output_throughput gate/testdata/trials/refengine-tp2-nccl/*.json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			samples = append(samples, args...)
			cfg := gate.DefaultCalibrationConfig()
			cfg.Reps, cfg.NullReps, cfg.Seed = reps, nullReps, seed
			if nullReps < 1000 {
				return withExitCode(2, fmt.Errorf("--null-reps %d: expected at least 1000 no-change comparisons", nullReps))
			}
			var err error
			if cvs != "none" {
				if cfg.CVs, err = floatList("--cv", cvs, 0.01); err != nil {
					return withExitCode(2, err)
				}
			} else {
				cfg.CVs = nil
			}
			if cfg.Effects, err = floatList("--effects", effects, 0.01); err != nil {
				return withExitCode(2, err)
			}
			if cfg.Ns, err = intList("--trials", trials); err != nil {
				return withExitCode(2, err)
			}
			lk, err := intList("--looks", looks)
			if err != nil {
				return withExitCode(2, err)
			}
			plan := gate.SequentialPlan{Looks: lk, Alpha: alpha}
			if err := plan.Validate(); err != nil {
				return withExitCode(2, fmt.Errorf("--looks/--alpha: %w", err))
			}
			cfg.Sequential = &plan
			if storedN < 0 || storedN == 1 {
				return withExitCode(2, fmt.Errorf("--stored-baseline %d: expected 0 (none) or at least 2 trials", storedN))
			}
			cfg.StoredBaseline = storedN
			cfg.Opts.Alpha, cfg.Opts.MinEffect = alpha, minEffect/100
			if len(samples) > 0 {
				trialSet, err := loadTrialSet(samples)
				if err != nil {
					return withExitCode(2, fmt.Errorf("--samples: %w", err))
				}
				for i, t := range trialSet {
					v, ok := t[metric]
					if !ok {
						return withExitCode(2, fmt.Errorf("trial files: trial %d has no metric %q", i+1, metric))
					}
					cfg.Samples = append(cfg.Samples, v)
				}
				if len(cfg.Samples) < 3 {
					return withExitCode(2, fmt.Errorf("--samples: %d trials; expected at least 3 to resample from", len(cfg.Samples)))
				}
				if samplesLabel == "" {
					samplesLabel = "measured " + metric
				}
				cfg.SamplesLabel = fmt.Sprintf("%s (%d trials, CV %.1f%%)", samplesLabel, len(cfg.Samples), 100*gate.SampleCV(cfg.Samples))
			}
			start := time.Now()
			rows, err := gate.Calibrate(cmd.Context(), cfg)
			if err != nil {
				return withExitCode(2, err)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"config": cfg, "rows": rows})
			}
			table := gate.CalibrationMarkdown(rows, cfg.Effects)
			header := fmt.Sprintf("Calibration: %d no-change and %d regressed comparisons per cell, seed %d, alpha %g, min effect %g%%, rank guard %g, sequential looks %v (nominal level per look %.4f); regressions are true throughput drops.\n\n",
				cfg.NullReps, cfg.Reps, cfg.Seed, alpha, minEffect, cfg.Opts.RankAlpha, lk, plan.NominalAlpha())
			return publishCalibration(cmd, header+table, start, writeDocs, calBegin, calEnd)
		},
	}
	f := cmd.Flags()
	f.IntVar(&reps, "reps", 2000, "simulated comparisons per cell with a true regression")
	f.IntVar(&nullReps, "null-reps", 20000, "simulated no-change comparisons per cell (false alarms; at least 1000)")
	f.Uint64Var(&seed, "seed", 1, "random seed (results are deterministic for a seed)")
	f.StringVar(&cvs, "cv", "1,2,3,5", `synthetic noise levels: coefficients of variation in percent ("none": measured noise only)`)
	f.StringVar(&trials, "trials", "3,5,10", "fixed trial counts per side")
	f.StringVar(&effects, "effects", "3,5,10", "true regressions to detect, in percent")
	f.StringVar(&looks, "looks", "5,10", "sequential plan: trial counts per side at which the gate decides")
	f.IntVar(&storedN, "stored-baseline", 10, "also simulate the sequential plan against a stored baseline of this many trials (0: skip)")
	f.Float64Var(&alpha, "alpha", 0.01, "false-alarm bound (one-sided)")
	f.Float64Var(&minEffect, "min-effect", 2, "minimum effect in percent")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.StringVar(&writeDocs, "write-docs", "", "replace the calibration table between the markers in this markdown file")
	f.StringSliceVar(&samples, "samples", nil, "measured trial files to resample noise from (also accepted as arguments)")
	f.StringVar(&metric, "metric", "output_throughput", "metric of the measured trials")
	f.StringVar(&samplesLabel, "samples-label", "", "name of the measured trials in the table")
	return cmd
}

const (
	calBegin = "<!-- calibration:begin (reckon calibrate --write-docs) -->"
	calEnd   = "<!-- calibration:end -->"
)

// publishCalibration prints a calibration table, how long it took, and, with --write-docs, puts
// it between the begin and end markers of that file.
func publishCalibration(cmd *cobra.Command, text string, start time.Time, writeDocs, begin, end string) error {
	fmt.Fprint(cmd.OutOrStdout(), text)
	fmt.Fprintf(cmd.ErrOrStderr(), "calibrated in %s\n", time.Since(start).Round(time.Millisecond))
	if writeDocs == "" {
		return nil
	}
	if err := replaceBetween(writeDocs, begin, end, text); err != nil {
		return withExitCode(3, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "updated %s\n", writeDocs)
	return nil
}

// replaceBetween replaces the text between two marker lines of a markdown file, atomically.
func replaceBetween(path, calBegin, calEnd, table string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--write-docs: %w", err)
	}
	i := bytes.Index(data, []byte(calBegin))
	j := bytes.Index(data, []byte(calEnd))
	if i < 0 || j < i {
		return fmt.Errorf("--write-docs: %s has no %q ... %q markers", path, calBegin, calEnd)
	}
	var out bytes.Buffer
	out.Write(data[:i+len(calBegin)])
	out.WriteString("\n" + table + "\n")
	out.Write(data[j:])
	if err := atomicfile.WriteFile(path, out.Bytes()); err != nil {
		return fmt.Errorf("--write-docs: %w", err)
	}
	return nil
}

func floatList(flag, s string, scale float64) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(p), "%"))
		if p == "" {
			continue
		}
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0) {
			return nil, fmt.Errorf("%s: %q is not a positive number", flag, p)
		}
		out = append(out, v*scale)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty list", flag)
	}
	return out, nil
}

func intList(flag, s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		v, err := strconv.Atoi(p)
		if err != nil || v < 2 {
			return nil, fmt.Errorf("%s: %q is not an integer >= 2", flag, p)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty list", flag)
	}
	return out, nil
}

func jsonEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc
}
