package gate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/reckon-ci/reckon/internal/num"
)

// CalibrationConfig describes a calibration run: simulated trials with log-normal noise, judged
// by Compare (fixed number of trials) and by a SequentialPlan, to measure the false-alarm rate
// (no true change) and the detection rate of true regressions.
type CalibrationConfig struct {
	CVs     []float64 // coefficients of variation of the trial noise, e.g. 0.01, 0.02, 0.03, 0.05
	Effects []float64 // true throughput regressions to detect, e.g. 0.03, 0.05, 0.10
	Ns      []int     // fixed trials per side, e.g. 3, 5, 10
	// Reps is the number of simulated comparisons per cell with a true regression.
	Reps int
	// NullReps is the number of simulated no-change comparisons per cell (at least 1,000; the
	// false-alarm rate is near 1%, so 20,000 pin it to about ±0.15%). 0 means Reps.
	NullReps int
	Seed     uint64
	Opts     StatOptions
	// Sequential, when set, adds rows for the sequential plan (both sides grow: a same-run A/B).
	Sequential *SequentialPlan
	// StoredBaseline, when > 0 (and Sequential is set), adds rows for the sequential plan against
	// a stored baseline of this many trials: only head grows.
	StoredBaseline int
	// Samples, when set, adds rows with measured noise: trials are resampled (with replacement)
	// from these measured values, normalised to their median, and the regression applied to head.
	Samples []float64
	// SamplesLabel names the measured samples in the table.
	SamplesLabel string

	samplesMedian float64
}

// DefaultCalibrationConfig is the configuration of `reckon calibrate` and the benchmark.
func DefaultCalibrationConfig() CalibrationConfig {
	plan := DefaultSequentialPlan()
	return CalibrationConfig{
		CVs: []float64{0.01, 0.02, 0.03, 0.05}, Effects: []float64{0.03, 0.05, 0.10}, Ns: []int{3, 5, 10},
		Reps: 2000, NullReps: 20000, Seed: 1, Opts: DefaultStatOptions(), Sequential: &plan, StoredBaseline: 10,
	}
}

// CalibrationRow is one line of the calibration table.
type CalibrationRow struct {
	Noise string  `json:"noise"` // "CV 2%" or the samples label
	CV    float64 `json:"cv"`
	Mode  string  `json:"mode"` // "fixed" or "sequential"
	N     int     `json:"n"`    // trials per side (maximum for sequential)
	Reps  int     `json:"reps"`
	// NullReps is the number of no-change comparisons.
	NullReps int `json:"null_reps"`
	// FalseAlarm is the fraction of no-change comparisons judged a regression; FalseAlarmHigh
	// is the upper end of its 95% Wilson interval.
	FalseAlarm     float64 `json:"false_alarm"`
	FalseAlarmHigh float64 `json:"false_alarm_high"`
	// NullInconclusive is the fraction of no-change comparisons judged inconclusive.
	NullInconclusive float64 `json:"null_inconclusive"`
	// Detect maps each true regression (fraction) to the fraction judged a regression.
	Detect map[float64]float64 `json:"-"`
	// TTestDetect is the detection rate of the one-sided t-test alone (no rank guard, no minimum
	// effect) at the same level: the ceiling the gate approaches.
	TTestDetect map[float64]float64 `json:"-"`
	// MeanTrialsNull is the mean number of trials per side used under no change (sequential).
	MeanTrialsNull float64 `json:"mean_trials_null,omitempty"`
	// MeanTrials is the mean number of trials per side used under each regression (sequential).
	MeanTrials map[float64]float64 `json:"-"`
	// Effects lists Detect, TTestDetect and MeanTrials per effect (the JSON form).
	Effects []EffectRate `json:"effects"`
}

// EffectRate is the detection of one true regression in a calibration row.
type EffectRate struct {
	Effect     float64  `json:"effect"`
	Detect     float64  `json:"detect"`
	TTest      *float64 `json:"ttest_detect,omitempty"`
	MeanTrials *float64 `json:"mean_trials,omitempty"`
}

func (r *CalibrationRow) fillEffects(effects []float64) {
	r.Effects = nil
	for _, e := range effects {
		er := EffectRate{Effect: e, Detect: r.Detect[e]}
		if v, ok := r.TTestDetect[e]; ok {
			er.TTest = &v
		}
		if v, ok := r.MeanTrials[e]; ok {
			er.MeanTrials = &v
		}
		r.Effects = append(r.Effects, er)
	}
}

// Calibrate runs the simulation. It is deterministic for a given config and checks ctx between
// cells.
func Calibrate(ctx context.Context, cfg CalibrationConfig) ([]CalibrationRow, error) {
	if cfg.Reps < 1 {
		return nil, fmt.Errorf("calibrate: reps %d; expected at least 1", cfg.Reps)
	}
	if cfg.NullReps <= 0 {
		cfg.NullReps = cfg.Reps
	}
	opts := cfg.Opts.withDefaults()
	m, _ := MetricFor("output_throughput")
	noises, err := cfg.noises()
	if err != nil {
		return nil, err
	}
	var rows []CalibrationRow
	for ni, nz := range noises {
		s := &calSim{cfg: &cfg, opts: opts, m: m, nz: nz, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(ni)+1))}
		for _, n := range cfg.Ns {
			if err := ctx.Err(); err != nil {
				return rows, err
			}
			rows = append(rows, s.fixedRow(n))
		}
		if cfg.Sequential == nil {
			continue
		}
		plan := *cfg.Sequential
		if err := plan.Validate(); err != nil {
			return rows, err
		}
		modes := []int{0}
		if cfg.StoredBaseline > 0 {
			modes = append(modes, cfg.StoredBaseline)
		}
		for _, stored := range modes {
			if err := ctx.Err(); err != nil {
				return rows, err
			}
			row, err := s.sequentialRow(plan, stored)
			if err != nil {
				return rows, err
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// calNoise is one noise level a calibration simulates: a log-normal CV, or the measured samples.
type calNoise struct {
	label    string
	cv       float64
	measured bool
}

// noises lists the noise levels to simulate: each of cfg.CVs, then the measured samples if any.
func (cfg *CalibrationConfig) noises() ([]calNoise, error) {
	var noises []calNoise
	for _, cv := range cfg.CVs {
		noises = append(noises, calNoise{label: fmt.Sprintf("CV %g%%", cv*100), cv: cv})
	}
	if len(cfg.Samples) > 0 {
		for i, s := range cfg.Samples {
			if !(s > 0) || math.IsInf(s, 0) {
				return nil, fmt.Errorf("calibrate: sample %d is %v; expected a positive number", i+1, s)
			}
		}
		lbl := cfg.SamplesLabel
		if lbl == "" {
			lbl = "measured"
		}
		noises = append(noises, calNoise{label: lbl, cv: SampleCV(cfg.Samples), measured: true})
	}
	if len(noises) == 0 {
		return nil, fmt.Errorf("calibrate: no noise to simulate; give CVs or measured samples")
	}
	return noises, nil
}

// calSim simulates comparisons at one noise level, drawing every trial from one seeded source so
// that a calibration is deterministic.
type calSim struct {
	cfg  *CalibrationConfig
	opts StatOptions
	m    Metric
	nz   calNoise
	rng  *rand.Rand
}

// draw returns k trial values at the noise level, scaled by scale (1 - the true regression).
func (s *calSim) draw(k int, scale float64) []float64 {
	out := make([]float64, k)
	for i := range out {
		out[i] = scale * s.cfg.sample(s.rng, s.nz.cv, s.nz.measured)
	}
	return out
}

// reps is the number of repetitions for a true regression eff: NullReps under no change.
func (s *calSim) reps(eff float64) int {
	if eff == 0 {
		return s.cfg.NullReps
	}
	return s.cfg.Reps
}

// fixedRow simulates fixed-size comparisons of n trials per side under no change and under each
// regression of cfg.Effects.
func (s *calSim) fixedRow(n int) CalibrationRow {
	cfg := s.cfg
	row := CalibrationRow{Noise: s.nz.label, CV: s.nz.cv, Mode: "fixed", N: n, Reps: cfg.Reps, NullReps: cfg.NullReps,
		Detect: map[float64]float64{}, TTestDetect: map[float64]float64{}}
	for _, eff := range append([]float64{0}, cfg.Effects...) {
		var reg, inc, tt int
		reps := s.reps(eff)
		for i := 0; i < reps; i++ {
			r := Compare(s.draw(n, 1), s.draw(n, 1-eff), s.m, s.opts)
			switch r.Outcome {
			case Regression:
				reg++
			case Undecided:
				inc++
			}
			if r.PWorse <= s.opts.Alpha {
				tt++
			}
		}
		if eff == 0 {
			row.FalseAlarm, row.FalseAlarmHigh = frac(reg, reps), wilsonHigh(reg, reps)
			row.NullInconclusive = frac(inc, reps)
		} else {
			row.Detect[eff] = frac(reg, reps)
			row.TTestDetect[eff] = frac(tt, reps)
		}
	}
	row.fillEffects(cfg.Effects)
	return row
}

// sequentialRow simulates sequential comparisons by plan, against a fresh base side or (stored >
// 0) a stored baseline of that many trials, under no change and under each regression.
func (s *calSim) sequentialRow(plan SequentialPlan, stored int) (CalibrationRow, error) {
	cfg := s.cfg
	mode := "sequential " + looksList(plan.Looks) + " per side"
	if stored > 0 {
		mode = fmt.Sprintf("sequential %s vs a stored baseline of %d", looksList(plan.Looks), stored)
	}
	row := CalibrationRow{Noise: s.nz.label, CV: s.nz.cv, Mode: mode, N: plan.Max(), Reps: cfg.Reps, NullReps: cfg.NullReps,
		Detect: map[float64]float64{}, MeanTrials: map[float64]float64{}}
	for _, eff := range append([]float64{0}, cfg.Effects...) {
		var reg, inc, trials int
		reps := s.reps(eff)
		for i := 0; i < reps; i++ {
			outcome, n, err := s.sequentialRun(plan, stored, eff)
			if err != nil {
				return row, err
			}
			switch outcome {
			case Regression:
				reg++
			case Undecided:
				inc++
			}
			trials += n
		}
		if eff == 0 {
			row.FalseAlarm, row.FalseAlarmHigh = frac(reg, reps), wilsonHigh(reg, reps)
			row.NullInconclusive = frac(inc, reps)
			row.MeanTrialsNull = float64(trials) / float64(reps)
		} else {
			row.Detect[eff] = frac(reg, reps)
			row.MeanTrials[eff] = float64(trials) / float64(reps)
		}
	}
	row.fillEffects(cfg.Effects)
	return row, nil
}

// sequentialRun runs one sequential comparison by plan under true regression eff until it
// decides, and returns its outcome and the trials the head side used.
func (s *calSim) sequentialRun(plan SequentialPlan, stored int, eff float64) (StatOutcome, int, error) {
	base, head := s.draw(plan.Looks[0], 1), s.draw(plan.Looks[0], 1-eff)
	if stored > 0 {
		base = s.draw(stored, 1)
	}
	for {
		d, err := plan.Decide(base, head, s.m, s.opts)
		if err != nil {
			return "", 0, err
		}
		if !d.NeedMore {
			return d.Result.Outcome, len(head), nil
		}
		if stored == 0 {
			base = append(base, s.draw(d.NextN-len(base), 1)...)
		}
		head = append(head, s.draw(d.NextN-len(head), 1-eff)...)
	}
}

// sample draws one trial value with median 1: log-normal with the given CV, or a resample of the
// measured values normalised to their median.
func (cfg *CalibrationConfig) sample(rng *rand.Rand, cv float64, measured bool) float64 {
	if measured {
		if cfg.samplesMedian == 0 {
			cfg.samplesMedian = num.Median(cfg.Samples)
		}
		return cfg.Samples[rng.IntN(len(cfg.Samples))] / cfg.samplesMedian
	}
	sigma := math.Sqrt(math.Log1p(cv * cv))
	return math.Exp(sigma * rng.NormFloat64())
}

// SampleCV returns the coefficient of variation (sample SD / mean) of xs.
func SampleCV(xs []float64) float64 {
	m, v := meanVar(xs)
	if m == 0 || len(xs) < 2 {
		return 0
	}
	return math.Sqrt(v) / m
}

func frac(k, n int) float64 { return float64(k) / float64(n) }

// wilsonHigh is the upper end of the 95% Wilson score interval of k successes in n trials.
func wilsonHigh(k, n int) float64 {
	const z = 1.959964
	p, nf := float64(k)/float64(n), float64(n)
	center := p + z*z/(2*nf)
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))
	return (center + half) / (1 + z*z/nf)
}

// CalibrationMarkdown renders the calibration rows as a markdown table.
func CalibrationMarkdown(rows []CalibrationRow, effects []float64) string {
	var b strings.Builder
	b.WriteString("| noise | trials per side | false alarms (95% upper) | no-change inconclusive |")
	for _, e := range effects {
		fmt.Fprintf(&b, " detect %g%% |", e*100)
	}
	b.WriteString(" t-test alone, 5% | mean trials (null / 5%) |\n|---|---|---|---|")
	for range effects {
		b.WriteString("---|")
	}
	b.WriteString("---|---|\n")
	for _, r := range rows {
		n := fmt.Sprint(r.N)
		if r.Mode != "fixed" {
			n = r.Mode
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f%% (%.2f%%) | %s |", r.Noise, n, 100*r.FalseAlarm, 100*r.FalseAlarmHigh, pct(r.NullInconclusive))
		for _, e := range effects {
			fmt.Fprintf(&b, " %s |", pct(r.Detect[e]))
		}
		if v, ok := r.TTestDetect[0.05]; ok {
			fmt.Fprintf(&b, " %s |", pct(v))
		} else {
			b.WriteString(" – |")
		}
		if r.MeanTrials != nil {
			fmt.Fprintf(&b, " %.1f / %.1f |\n", r.MeanTrialsNull, r.MeanTrials[0.05])
		} else {
			fmt.Fprintf(&b, " %d |\n", r.N)
		}
	}
	return b.String()
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }
