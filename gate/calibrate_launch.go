package gate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
)

// LaunchDesign is a measurement design: launches per side, trials per launch.
type LaunchDesign struct {
	Launches int `json:"launches"`
	Trials   int `json:"trials"`
}

func (d LaunchDesign) String() string { return fmt.Sprintf("%d x %d", d.Launches, d.Trials) }

// LaunchNoiseLevel is the simulated noise of a cell: between-launch and within-launch CV.
type LaunchNoiseLevel struct {
	Between float64 `json:"between"`
	Within  float64 `json:"within"`
}

// LaunchCalibrationConfig describes `reckon calibrate launches`: simulated same-run A/B
// comparisons of launches x trials with known between- and within-launch noise, judged by
// CompareLaunches exactly as the gate judges them (a one-launch design uses the prior).
type LaunchCalibrationConfig struct {
	Noise   []LaunchNoiseLevel `json:"noise"`
	Designs []LaunchDesign     `json:"designs"`
	// Effect is the true throughput regression to detect (0.05 = 5% slower).
	Effect float64 `json:"effect"`
	// Reps and NullReps are the comparisons per cell with and without the regression.
	Reps     int         `json:"reps"`
	NullReps int         `json:"null_reps"`
	Seed     uint64      `json:"seed"`
	Opts     StatOptions `json:"opts"`
	// Prior is the between-launch prior the gate uses when a design has one launch per side
	// (zero: DefaultBetweenLaunchCV).
	Prior LaunchNoise `json:"prior"`
	// Workers bounds the cells simulated at once (0: GOMAXPROCS); results do not depend on it.
	Workers int `json:"-"`
}

// DefaultLaunchCalibrationConfig is the configuration of `reckon calibrate launches`: noise
// levels 1, 2 and 5% (between = within), one-launch and multi-launch designs, a 5% slowdown.
func DefaultLaunchCalibrationConfig() LaunchCalibrationConfig {
	var noise []LaunchNoiseLevel
	for _, cv := range []float64{0.01, 0.02, 0.05} {
		noise = append(noise, LaunchNoiseLevel{Between: cv, Within: cv})
	}
	return LaunchCalibrationConfig{
		Noise: noise,
		Designs: []LaunchDesign{{1, 5}, {1, 10}, {3, 3}, {3, 5}, {4, 3}, {5, 3}, {5, 5}, {8, 3}, {10, 3},
			{20, 3}, {40, 3}},
		Effect: 0.05, Reps: 2000, NullReps: 10000, Seed: 1, Opts: DefaultStatOptions(),
	}
}

// LaunchCalibrationRow is one cell: a noise level and a design.
type LaunchCalibrationRow struct {
	Noise  LaunchNoiseLevel `json:"noise"`
	Design LaunchDesign     `json:"design"`
	// FalseAlarm is the fraction of no-change comparisons judged a regression, FalseAlarmHigh
	// the upper end of its 95% Wilson interval; NullInconclusive the fraction inconclusive.
	FalseAlarm       float64 `json:"false_alarm"`
	FalseAlarmHigh   float64 `json:"false_alarm_high"`
	NullInconclusive float64 `json:"null_inconclusive"`
	// Detect is the fraction of comparisons with the true regression judged a regression.
	Detect float64 `json:"detect"`
	// Prior is true when the design had one launch per side (the prior was used).
	Prior bool `json:"prior"`
}

// Meets reports whether the row reaches the aims: false alarms <= 1% and detection >= 95%.
func (r LaunchCalibrationRow) Meets() bool { return r.FalseAlarm <= 0.01 && r.Detect >= 0.95 }

// CalibrateLaunches runs the launches x trials simulation. Every cell has its own random
// stream (seed, cell), so the result is deterministic whatever the parallelism.
func CalibrateLaunches(ctx context.Context, cfg LaunchCalibrationConfig) ([]LaunchCalibrationRow, error) {
	if cfg.Reps < 1 || cfg.NullReps < 1 {
		return nil, fmt.Errorf("calibrate launches: reps %d, null reps %d; expected at least 1", cfg.Reps, cfg.NullReps)
	}
	for _, d := range cfg.Designs {
		if d.Launches < 1 || d.Trials < 1 {
			return nil, fmt.Errorf("calibrate launches: design %s; expected at least 1 launch of 1 trial", d)
		}
	}
	m, _ := MetricFor("output_throughput")
	prior := cfg.Prior
	if prior == (LaunchNoise{}) {
		prior = PriorLaunchNoise(0, "")
	}
	rows := make([]LaunchCalibrationRow, len(cfg.Noise)*len(cfg.Designs))
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	cells := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range cells {
				nz, d := cfg.Noise[i/len(cfg.Designs)], cfg.Designs[i%len(cfg.Designs)]
				rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1))
				sb, sw := math.Sqrt(math.Log1p(nz.Between*nz.Between)), math.Sqrt(math.Log1p(nz.Within*nz.Within))
				side := func(scale float64) [][]float64 {
					out := make([][]float64, d.Launches)
					for l := range out {
						a := sb * rng.NormFloat64()
						out[l] = make([]float64, d.Trials)
						for t := range out[l] {
							out[l][t] = scale * math.Exp(a+sw*rng.NormFloat64())
						}
					}
					return out
				}
				row := LaunchCalibrationRow{Noise: nz, Design: d, Prior: d.Launches == 1}
				for _, eff := range []float64{0, cfg.Effect} {
					reps := cfg.Reps
					if eff == 0 {
						reps = cfg.NullReps
					}
					var reg, inc int
					for k := 0; k < reps; k++ {
						if k%256 == 0 && ctx.Err() != nil {
							break
						}
						r := CompareLaunches(side(1), side(1-eff), m, cfg.Opts, prior)
						switch r.Outcome {
						case Regression:
							reg++
						case Undecided:
							inc++
						}
					}
					if eff == 0 {
						row.FalseAlarm, row.FalseAlarmHigh, row.NullInconclusive = frac(reg, reps), wilsonHigh(reg, reps), frac(inc, reps)
					} else {
						row.Detect = frac(reg, reps)
					}
				}
				rows[i] = row
			}
		}()
	}
	for i := range rows {
		if ctx.Err() != nil {
			break
		}
		cells <- i
	}
	close(cells)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return rows, nil
}

// LaunchCalibrationMarkdown renders the rows as a markdown table, and under it, per noise
// level, the design with the fewest trials that meets the aims (false alarms <= 1%, detection
// >= 95%), or that none does.
func LaunchCalibrationMarkdown(rows []LaunchCalibrationRow, effect float64, prior LaunchNoise) string {
	if prior == (LaunchNoise{}) {
		prior = PriorLaunchNoise(0, "")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| between / within CV | launches x trials per side | false alarms (95%% upper) | no-change inconclusive | detect %g%% | meets aims |\n|---|---|---|---|---|---|\n", 100*effect)
	for _, r := range rows {
		d := r.Design.String()
		if r.Prior {
			d += fmt.Sprintf(" (prior %g%%)", 100*prior.CV)
		}
		meets := ""
		if r.Meets() {
			meets = "yes"
		}
		fmt.Fprintf(&b, "| %.4g%% / %.4g%% | %s | %.2f%% (%.2f%%) | %s | %s | %s |\n", 100*r.Noise.Between, 100*r.Noise.Within, d,
			100*r.FalseAlarm, 100*r.FalseAlarmHigh, pct(r.NullInconclusive), pct(r.Detect), meets)
	}
	b.WriteString("\n")
	seen := map[LaunchNoiseLevel]bool{}
	for _, r := range rows {
		if seen[r.Noise] {
			continue
		}
		seen[r.Noise] = true
		var best *LaunchCalibrationRow
		for i := range rows {
			c := &rows[i]
			if c.Noise != r.Noise || !c.Meets() {
				continue
			}
			if best == nil || c.Design.Launches*c.Design.Trials < best.Design.Launches*best.Design.Trials ||
				c.Design.Launches*c.Design.Trials == best.Design.Launches*best.Design.Trials && c.Design.Launches < best.Design.Launches {
				best = c
			}
		}
		if best == nil {
			fmt.Fprintf(&b, "- between %g%% / within %g%%: no simulated design reaches false alarms <= 1%% and detection >= 95%%\n", 100*r.Noise.Between, 100*r.Noise.Within)
			continue
		}
		fmt.Fprintf(&b, "- between %g%% / within %g%%: **%s** (launches x trials per side; false alarms %.2f%%, detection %s)\n",
			100*r.Noise.Between, 100*r.Noise.Within, best.Design, 100*best.FalseAlarm, pct(best.Detect))
	}
	return b.String()
}
