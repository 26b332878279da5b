package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/reckon-ci/reckon/spec"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/atomicfile"
)

const (
	e2eCalBegin = "<!-- e2e-calibration:begin (reckon calibrate e2e --write-docs) -->"
	e2eCalEnd   = "<!-- e2e-calibration:end -->"
)

// e2eWorkload is the workload of every generated spec: one wave of 8 requests of 16 output
// tokens, so a trial is 16 engine steps (about 0.85 s of a modelled Llama-3.1-70B at tp 1 on an
// H100: 52 ms per step, long enough that the tiny model's CPU compute fits inside it on a loaded
// 2-core box and the device clock, not the machine, sets the throughput).
const (
	e2eConcurrency = 8
	e2ePrompts     = 8
	e2eInputLen    = 32
	e2eOutputLen   = 16
)

// e2eStepsPerTrial is the engine steps of one trial (a prefill producing the first token, then
// one decode step per further token, for each wave of concurrent requests): the per-step CV that
// gives a trial the within-launch CV w is w·√steps (the sum of n independent steps has CV/√n).
const e2eStepsPerTrial = e2eOutputLen * ((e2ePrompts + e2eConcurrency - 1) / e2eConcurrency)

type e2eConfig struct {
	Runs      int                     `json:"runs"`
	Noise     []gate.LaunchNoiseLevel `json:"noise"`
	Designs   []gate.LaunchDesign     `json:"designs"`
	Effect    float64                 `json:"effect"`
	Alpha     float64                 `json:"alpha"`
	MinEffect float64                 `json:"min_effect"`
	Prior     float64                 `json:"prior"`
	Seed      uint64                  `json:"seed"`
	Parallel  int                     `json:"parallel"`
	Model     string                  `json:"modelled_model"`
	Warmup    int                     `json:"warmup"`
	OutDir    string                  `json:"out"`
	// Budget stops starting runs after this long (0: none); the runs under way finish.
	Budget    time.Duration `json:"budget,omitempty"`
	Reckon    string        `json:"-"`
	Refengine string        `json:"-"`
	TinyModel string        `json:"-"`
}

// e2eCell is one (noise level, design) of the table with its counts.
type e2eCell struct {
	Noise  gate.LaunchNoiseLevel `json:"noise"`
	Design gate.LaunchDesign     `json:"design"`
	// Null and Slow count the no-change runs and the runs with the slowdown on head.
	Null e2eCount `json:"null"`
	Slow e2eCount `json:"slow"`
	// Sim is the simulation's row for the same cell (gate.CalibrateLaunches).
	Sim *gate.LaunchCalibrationRow `json:"simulation,omitempty"`
	// SimReps is the simulated no-change comparisons behind Sim.
	SimReps int `json:"simulation_null_reps,omitempty"`
	// SimMeasured is the simulation at the noise the gate measured in this cell's runs (the
	// within-launch CV measured, the between-launch CV measured where the design has launches
	// to measure it, else the seeded one): what the statistics predict for the noise the
	// engine, the machine and the load really produced.
	SimMeasured *gate.LaunchCalibrationRow `json:"simulation_measured,omitempty"`
}

type e2eCount struct {
	Runs         int `json:"runs"`
	Red          int `json:"red"`
	Inconclusive int `json:"inconclusive"`
	// Errors are runs without a throughput verdict (the gate or an engine failed); they are not
	// in Runs.
	Errors int `json:"errors"`
	// Sums of the squared measured CVs (and how many), for the RMS noise the gate measured.
	WithinSq  float64 `json:"within_sq"`
	WithinN   int     `json:"within_n"`
	BetweenSq float64 `json:"between_sq"`
	BetweenN  int     `json:"between_n"`
	Seconds   float64 `json:"seconds"`
}

type e2eJob struct {
	cell, rep int
	slow      bool
}

func newCalibrateE2ECmd() *cobra.Command {
	var (
		cfg                   e2eConfig
		cvs, designs          string
		effect, alpha, minEff float64
		prior                 float64
		simReps               int
		asJSON                bool
		writeDocs             string
		merge                 []string
	)
	cmd := &cobra.Command{
		Use:   "e2e [--runs R] [--cvs LIST] [--designs LIST] [--effect PCT] [--parallel N] [--out DIR] [--write-docs FILE]",
		Short: "False alarms and detection of the whole gate on the reference engine with known noise",
		Long: `e2e runs the whole gate (reckon gate as a subprocess: launches, trials, verdict) on generated
specs of the reference engine whose device clock (--clock modelled, a modelled Llama-3.1-70B at tp 1
on an H100) carries seeded noise of known size: a between-launch CV (--clock-launch-cv, one factor
per launch; the launch index comes from a counter file, so every relaunch draws its own) and a
within-launch CV (--clock-step-cv, per step, scaled so that a trial has the stated CV). For every
noise level and design (launches x trials per side, as in calibrate launches) it makes R no-change
runs (config head = config base) and R runs with head slowed by --effect (--fault-slowdown
1/(1-effect)), each with its own --clock-seed, and counts the throughput check's red verdicts and
inconclusive ones. Each rate is printed with its count and 95% Wilson interval, next to the
simulation's rate for the same cell (calibrate launches' code). Runs go --parallel at a time (the
device clock sleeps, so concurrency does not change the timings while the CPU keeps up). Every
run's spec, engine logs and results.json stay in --out for audit. SIGINT stops every gate and
engine and still prints (and with --write-docs writes) the partial table.`,
		Example: `  reckon calibrate e2e --runs 40 --parallel 8
  reckon calibrate e2e --runs 60 --cvs 2 --designs 1x5,4x3,10x3 --out out/e2e
  reckon calibrate e2e --runs 40 --write-docs docs/statistics.md`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if len(merge) > 0 {
				start := time.Now()
				mc, cells, wall, interrupted, err := mergeE2E(merge)
				if err != nil {
					return withExitCode(2, err)
				}
				if simReps > 0 {
					simulateE2ECells(context.Background(), mc, cells, simReps)
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), map[string]any{"config": mc, "cells": cells, "wall_s": wall.Seconds(), "interrupted": interrupted})
				}
				return publishCalibration(cmd, e2eMarkdown(mc, cells, wall, simReps, interrupted), start, writeDocs, e2eCalBegin, e2eCalEnd)
			}
			if cfg.Noise, err = noiseLevels(cvs); err != nil {
				return withExitCode(2, errors.New(strings.Replace(err.Error(), "--cv", "--cvs", 1)))
			}
			if cfg.Designs, err = launchDesigns(designs); err != nil {
				return withExitCode(2, err)
			}
			for _, d := range cfg.Designs {
				if d.Launches == 2 {
					return withExitCode(2, fmt.Errorf("--designs: %s: a statistical check needs 1 launch per side or at least %d", d, gate.MinLaunchesToMeasure))
				}
				if d.Launches == 1 && d.Trials < 3 {
					return withExitCode(2, fmt.Errorf("--designs: %s: one launch needs at least 3 trials per side (the rank test)", d))
				}
			}
			if cfg.Runs < 1 || cfg.Parallel < 1 || simReps < 0 {
				return withExitCode(2, fmt.Errorf("--runs %d, --parallel %d, --sim-reps %d: expected at least 1, 1 and 0", cfg.Runs, cfg.Parallel, simReps))
			}
			if !(effect > 0 && effect < 50) || !(alpha > 0 && alpha < 0.5) || !(minEff >= 0 && minEff < 50) || prior < 0 || prior >= 100 {
				return withExitCode(2, fmt.Errorf("--effect %g, --alpha %g, --min-effect %g, --prior %g: out of range", effect, alpha, minEff, prior))
			}
			cfg.Effect, cfg.Alpha, cfg.MinEffect, cfg.Prior = effect/100, alpha, minEff/100, prior/100
			if cfg.Prior == 0 {
				cfg.Prior = gate.DefaultBetweenLaunchCV
			}
			if cfg.Reckon == "" {
				if cfg.Reckon, err = os.Executable(); err != nil {
					return withExitCode(2, fmt.Errorf("--reckon: %w", err))
				}
			}
			for _, p := range []*string{&cfg.Refengine, &cfg.TinyModel, &cfg.OutDir} {
				if *p, err = filepath.Abs(*p); err != nil {
					return withExitCode(2, err)
				}
			}
			for _, p := range []string{cfg.Refengine, cfg.TinyModel} {
				if _, err := os.Stat(p); err != nil {
					return withExitCode(2, fmt.Errorf("%w (make build builds bin/refengine)", err))
				}
			}
			if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
				return withExitCode(3, err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			start := time.Now()
			cells := runE2E(ctx, cfg, cmd.ErrOrStderr())
			interrupted := ctx.Err() != nil
			stop()
			if simReps > 0 {
				simulateE2ECells(context.Background(), cfg, cells, simReps)
			}
			wall := time.Since(start)
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"config": cfg, "cells": cells, "wall_s": wall.Seconds(), "interrupted": interrupted})
			}
			text := e2eMarkdown(cfg, cells, wall, simReps, interrupted)
			_ = atomicfile.WriteFile(filepath.Join(cfg.OutDir, "table.md"), []byte(text))
			if data, err := json.MarshalIndent(e2eSaved{cfg, cells, wall.Seconds(), interrupted}, "", "  "); err == nil {
				_ = atomicfile.WriteFile(filepath.Join(cfg.OutDir, "cells.json"), data)
			}
			if err := publishCalibration(cmd, text, start, writeDocs, e2eCalBegin, e2eCalEnd); err != nil {
				return err
			}
			if interrupted {
				return withExitCode(1, errors.New("calibrate e2e: interrupted; the table holds the runs that finished"))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Runs, "runs", 40, "gate runs per cell and side: R without a change and R with the slowdown")
	f.StringVar(&cvs, "cvs", "1,2,5", `noise levels in percent: "C" (between = within launch) or "B/W", comma-separated`)
	f.StringVar(&designs, "designs", "1x5,4x3,10x3", "designs: launches x trials per side (as calibrate launches), comma-separated")
	f.Float64Var(&effect, "effect", 5, "slowdown of head in the slowed runs, in percent of throughput (--fault-slowdown 1/(1-effect))")
	f.Float64Var(&alpha, "alpha", 0.01, "the throughput check's alpha")
	f.Float64Var(&minEff, "min-effect", 2, "the throughput check's min_effect, in percent")
	f.Float64Var(&prior, "prior", 0, "between-launch CV prior in percent for one-launch designs (0: the gate's default)")
	f.Uint64Var(&cfg.Seed, "seed", 1, "first --clock-seed; every run adds its own offset")
	f.IntVar(&cfg.Parallel, "parallel", 4, "gate runs at once")
	f.StringVar(&cfg.Model, "modelled-model", "llama-3.1-70b", "the device clock's modelled model (refengine --modelled-model)")
	f.IntVar(&cfg.Warmup, "warmup", 1, "warm-up requests per launch")
	f.StringVar(&cfg.OutDir, "out", "out/calibrate-e2e", "directory for every run's spec, logs and results.json, and the table")
	f.StringVar(&cfg.Reckon, "reckon", "", "reckon binary that runs the gates (default: this one)")
	f.StringVar(&cfg.Refengine, "refengine", "bin/refengine", "reference engine binary")
	f.StringVar(&cfg.TinyModel, "model-path", "fixtures/models/tiny.json", "the reference engine's (real, tiny) model")
	f.IntVar(&simReps, "sim-reps", 4000, "simulated no-change comparisons per cell for the simulation column (a quarter as many slowed; 0: none)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.StringVar(&writeDocs, "write-docs", "", "replace the e2e-calibration table between its markers in this markdown file")
	f.DurationVar(&cfg.Budget, "budget", 0, "start no run after this long (the runs under way finish; the table holds what finished); 0: no bound")
	f.StringSliceVar(&merge, "merge", nil, "run nothing: render one table from the cells.json of earlier --out directories (comma-separated)")
	return cmd
}

// runE2E runs every job, cfg.Parallel at a time, in an interleaved order (repetition, cell,
// side) so that an interrupted run leaves every cell with about the same number of runs.
func runE2E(ctx context.Context, cfg e2eConfig, log io.Writer) []e2eCell {
	var cells []e2eCell
	for _, nz := range cfg.Noise {
		for _, d := range cfg.Designs {
			cells = append(cells, e2eCell{Noise: nz, Design: d})
		}
	}
	jobs := make(chan e2eJob)
	var mu sync.Mutex
	var wg sync.WaitGroup
	total, done := 2*cfg.Runs*len(cells), 0
	for w := 0; w < cfg.Parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				t0 := time.Now()
				res, err := runE2EJob(ctx, cfg, cells[j.cell], j)
				if ctx.Err() != nil {
					continue // interrupted: the run decided nothing
				}
				mu.Lock()
				c := &cells[j.cell].Null
				if j.slow {
					c = &cells[j.cell].Slow
				}
				c.Seconds += time.Since(t0).Seconds()
				done++
				if err != nil {
					c.Errors++
					fmt.Fprintf(log, "[%d/%d] %s %s %s run %d: %v\n", done, total, noiseLabel(cells[j.cell].Noise), cells[j.cell].Design, side(j.slow), j.rep+1, err)
				} else {
					c.add(res)
					if done%10 == 0 || done == total {
						fmt.Fprintf(log, "[%d/%d] %s elapsed\n", done, total, time.Since(t0).Round(time.Second))
					}
				}
				mu.Unlock()
			}
		}()
	}
	var budget <-chan time.Time
	if cfg.Budget > 0 {
		budget = time.After(cfg.Budget)
	}
feed:
	for rep := 0; rep < cfg.Runs; rep++ {
		for i := range cells {
			for _, slow := range []bool{false, true} {
				select {
				case jobs <- e2eJob{cell: i, rep: rep, slow: slow}:
				case <-ctx.Done():
					break feed
				case <-budget:
					fmt.Fprintf(log, "--budget %s spent: no further runs are started\n", cfg.Budget)
					break feed
				}
			}
		}
	}
	close(jobs)
	wg.Wait()
	return cells
}

func side(slow bool) string {
	if slow {
		return "slow"
	}
	return "null"
}

func noiseLabel(n gate.LaunchNoiseLevel) string {
	return fmt.Sprintf("%g%%/%g%%", 100*n.Between, 100*n.Within)
}

// e2eVerdict is what one gate run's results.json says of its throughput check.
type e2eVerdict struct {
	Status, Outcome string
	Launch          *gate.LaunchStats
}

func (c *e2eCount) add(v e2eVerdict) {
	c.Runs++
	switch {
	case v.Status == "failed":
		c.Red++
	case v.Outcome == string(gate.Inconclusive):
		c.Inconclusive++
	}
	if ls := v.Launch; ls != nil {
		for _, e := range []gate.NoiseEstimate{ls.Base, ls.Head} {
			if !math.IsNaN(e.WithinCV) {
				c.WithinSq += e.WithinCV * e.WithinCV
				c.WithinN++
			}
			if !math.IsNaN(e.BetweenCV) && e.Launches >= gate.MinLaunchesToMeasure {
				c.BetweenSq += e.BetweenCV * e.BetweenCV
				c.BetweenN++
			}
		}
	}
}

// runE2EJob writes one run's spec and runs the gate on it.
func runE2EJob(ctx context.Context, cfg e2eConfig, cell e2eCell, j e2eJob) (e2eVerdict, error) {
	dir := filepath.Join(cfg.OutDir, strings.NewReplacer("%", "", "/", "-").Replace(noiseLabel(cell.Noise)),
		strings.ReplaceAll(cell.Design.String(), " ", ""), fmt.Sprintf("%s-%03d", side(j.slow), j.rep+1))
	if err := os.RemoveAll(dir); err != nil {
		return e2eVerdict{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return e2eVerdict{}, err
	}
	// Every run its own seed: cell, repetition and side.
	seed := cfg.Seed + uint64(j.cell)*100_000 + uint64(j.rep)*2
	if j.slow {
		seed++
	}
	specPath := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(specPath, []byte(e2eSpec(cfg, cell, seed, filepath.Join(dir, "launch-counter"), j.slow)), 0o644); err != nil {
		return e2eVerdict{}, err
	}
	d := cell.Design
	// Bound the run: each launch's start-up and trials at about 3 s each, with room to spare.
	timeout := time.Duration(2*d.Launches)*(10*time.Second+time.Duration(d.Trials+cfg.Warmup)*4*time.Second) + time.Minute
	out := filepath.Join(dir, "out")
	args := []string{"gate", "--spec", specPath, "--out", out, "--baselines", filepath.Join(dir, "no-baselines"),
		"--quiet", "--commit", "calibrate-e2e", "--timeout", timeout.String(),
		"--between-launch-cv", fmt.Sprintf("%g%%", 100*cfg.Prior)}
	logf, err := os.Create(filepath.Join(dir, "gate.log"))
	if err != nil {
		return e2eVerdict{}, err
	}
	defer logf.Close()
	c := exec.CommandContext(ctx, cfg.Reckon, args...)
	c.Stdout, c.Stderr = logf, logf
	c.Env = e2eEnv()
	startInOwnGroup(c)
	runErr := c.Run()
	killGroup(c)
	if ctx.Err() != nil {
		return e2eVerdict{}, ctx.Err()
	}
	// results.json holds the verdict and every trial; the HTML and JUnit renderings of it are
	// dropped to keep thousands of runs small.
	_ = os.Remove(filepath.Join(out, "report.html"))
	_ = os.Remove(filepath.Join(out, "junit.xml"))
	v, err := readE2EVerdict(filepath.Join(out, "results.json"))
	if err != nil {
		if runErr != nil {
			return v, fmt.Errorf("%v; %w (see %s)", runErr, err, logf.Name())
		}
		return v, err
	}
	return v, nil
}

// e2eEnv is this process's environment without what would change a gate run: no history to
// append to, no testbed prior (the flag states it).
func e2eEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "RECKON_HISTORY" || k == gate.BetweenLaunchEnv {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "NO_COLOR=1")
}

// e2eSpec is the generated spec of one run: configs base and head on the device clock with the
// cell's noise, head slowed when slow.
func e2eSpec(cfg e2eConfig, cell e2eCell, seed uint64, counter string, slow bool) string {
	args := []string{"--clock", "modelled", "--modelled-model", cfg.Model, "--clock-seed", fmt.Sprint(seed),
		"--clock-launch-counter", counter}
	if cell.Noise.Between > 0 {
		args = append(args, "--clock-launch-cv", fmt.Sprintf("%g", cell.Noise.Between))
	}
	if cell.Noise.Within > 0 {
		args = append(args, "--clock-step-cv", fmt.Sprintf("%.6g", cell.Noise.Within*math.Sqrt(e2eStepsPerTrial)))
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `# Generated by reckon calibrate e2e: noise between-launch %g%%, within-launch %g%%; %s per side; head %s.
name: calibrate-e2e
engine:
  kind: sglang
  command: [%q]
  model: %q
  tp_size: 1
  args: [%s]
  ready_timeout: 60s
  stop_grace: 5s
configs:
  - name: base
  - name: head
`, 100*cell.Noise.Between, 100*cell.Noise.Within, cell.Design, map[bool]string{true: fmt.Sprintf("slowed %g%%", 100*cfg.Effect), false: "unchanged"}[slow],
		cfg.Refengine, cfg.TinyModel, strings.Join(quoted, ", "))
	if slow {
		fmt.Fprintf(&b, "    args: [--fault-slowdown, %q]\n", fmt.Sprintf("%.6g", 1/(1-cfg.Effect)))
	}
	fmt.Fprintf(&b, `workloads:
  - name: decode
    concurrency: %d
    num_prompts: %d
    input_len: %d
    output_len: %d
    warmup: %d
    trials: %d
`, e2eConcurrency, e2ePrompts, e2eInputLen, e2eOutputLen, cfg.Warmup, cell.Design.Trials)
	if cell.Design.Launches > 1 {
		fmt.Fprintf(&b, "    launches: %d\n", cell.Design.Launches)
	}
	fmt.Fprintf(&b, `    seed: 1
    request_timeout: 60s
checks:
  - kind: throughput
    config: head
    workload: decode
    metric: output_throughput
    against: config:base
    min_effect: %g%%
    alpha: %g
`, 100*cfg.MinEffect, cfg.Alpha)
	return b.String()
}

// readE2EVerdict reads the throughput check of a run's results.json.
func readE2EVerdict(path string) (e2eVerdict, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return e2eVerdict{}, err
	}
	var res struct {
		Checks []struct {
			Kind    string `json:"kind"`
			Status  string `json:"status"`
			Outcome string `json:"outcome"`
			Message string `json:"message"`
			Stat    *struct {
				Launch *gate.LaunchStats `json:"launch"`
			} `json:"stat"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return e2eVerdict{}, fmt.Errorf("%s: %w", path, err)
	}
	for _, c := range res.Checks {
		if c.Kind != string((spec.KindThroughput)) {
			continue
		}
		if c.Outcome == string(gate.Error) || c.Status == "error" || c.Status == "not_run" {
			return e2eVerdict{}, fmt.Errorf("%s: throughput check %s: %s", path, c.Status, c.Message)
		}
		v := e2eVerdict{Status: c.Status, Outcome: c.Outcome}
		if c.Stat != nil {
			v.Launch = c.Stat.Launch
		}
		return v, nil
	}
	return e2eVerdict{}, fmt.Errorf("%s: no throughput check", path)
}
