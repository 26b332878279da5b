package device

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Clock is the device clock's time source: the wall clock in the engine, a fake one in tests.
type Clock interface {
	Now() time.Time
	// SleepUntil returns at t, or earlier when ctx is done.
	SleepUntil(ctx context.Context, t time.Time)
}

// WallClock is the real time source.
type WallClock struct{}

// Now is time.Now.
func (WallClock) Now() time.Time { return time.Now() }

// SleepUntil waits on a timer until t or ctx's end.
func (WallClock) SleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// Noise is the device clock's seeded noise, with a known structure (all multiplicative, mean 1):
//
//   - StepCV: within a launch, each step's modelled time is multiplied by a log-normal factor of
//     this coefficient of variation, drawn afresh every step, or every StepPeriod of modelled
//     busy time when StepPeriod > 0 (so that a trial of that length sees the whole CV rather than
//     CV/√steps); busy time is the sum of the steps' modelled times before slowdown and noise;
//   - LaunchCV: one log-normal factor of this CV per launch, drawn from (Seed, Launch);
//   - DriftPerMinute: the modelled time grows linearly with the launch's modelled busy time,
//     by this fraction per minute (negative: it shrinks; floored at 0.1).
//
// The draws come from a PCG stream seeded by (Seed, Launch): the same seed and launch index give
// the same factors, another launch index other ones.
type Noise struct {
	StepCV         float64
	StepPeriod     time.Duration
	LaunchCV       float64
	DriftPerMinute float64
	Seed           uint64
	Launch         uint64
}

// Validate checks the noise settings.
func (n Noise) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"--clock-step-cv", n.StepCV}, {"--clock-launch-cv", n.LaunchCV}} {
		if !(f.v >= 0 && f.v <= 2) {
			return fmt.Errorf("%s %v: expected a coefficient of variation in [0, 2]", f.name, f.v)
		}
	}
	if math.IsNaN(n.DriftPerMinute) || math.IsInf(n.DriftPerMinute, 0) || math.Abs(n.DriftPerMinute) > 10 {
		return fmt.Errorf("--clock-drift-per-minute %v: expected a fraction in [-10, 10]", n.DriftPerMinute)
	}
	if n.StepPeriod < 0 {
		return fmt.Errorf("--clock-step-period %v: expected a non-negative duration", n.StepPeriod)
	}
	return nil
}

// logNormal turns a standard normal draw into a mean-1 log-normal factor of coefficient of
// variation cv.
func logNormal(z, cv float64) float64 {
	if cv <= 0 {
		return 1
	}
	s2 := math.Log1p(cv * cv)
	return math.Exp(math.Sqrt(s2)*z - s2/2)
}

// Pacer makes scheduler steps last their modelled time: a step ends at
// start + max(real compute, Slowdown × noise × modelled), sleeping for the rest. Steps that follow
// each other without the engine idling start at the previous step's modelled end, so a timer
// that wakes late does not accumulate into lost throughput.
//
// With a catch-up allowance (CatchUp > 0), the time by which steps ended after their modelled end
// (real compute longer than modelled, or a step that started later than the previous step's end
// by more than its own modelled time: a late wake-up or a stall between steps) is a debt, up to
// CatchUp, that the following steps repay from their slack: they
// end earlier than their modelled time, never before their own real compute has finished; an idle
// wait clears the debt. An
// occasional slow CPU step (a long prefill, a GC pause, a neighbour's burst) then leaves the
// throughput of the modelled timeline unchanged; with CatchUp 0 every step lasts exactly the
// longer of its real and modelled time. The zero value is not usable; use NewPacer.
type Pacer struct {
	clk      Clock
	slowdown float64
	noise    Noise
	// CatchUp bounds the overrun debt that later steps repay (0: none). Set before the first step.
	CatchUp time.Duration

	mu        sync.Mutex
	rng       *rand.Rand
	launchMul float64
	stepMul   float64
	redrawAt  time.Duration // modelled busy time at which the step factor is redrawn
	busy      time.Duration // modelled busy time of this launch (before slowdown and noise)
	deadline  time.Time     // the previous step's end
	debt      time.Duration // lateness not yet repaid (at most CatchUp)
	st        PacerStats
}

// PacerStats count what the device clock did.
type PacerStats struct {
	// Steps paced; Overruns of them where the real CPU compute took longer than the step's
	// modelled time (then the step lasts the real time and throughput depends on the CPU).
	Steps, Overruns int64
	// Modelled is the sum of the steps' paced modelled times (slowdown and noise applied), Real
	// the sum of their real compute times, Slept the time spent waiting for the modelled end.
	Modelled, Real, Slept time.Duration
	// WorstOverrun is the largest real − modelled of an overrun step; Repaid the overrun time
	// that later steps made up from their slack (catch-up).
	WorstOverrun, Repaid time.Duration
	// LaunchFactor is this launch's between-launch factor.
	LaunchFactor float64
}

// NewPacer returns a pacer on clk; slowdown < 1 counts as 1.
func NewPacer(clk Clock, slowdown float64, noise Noise) *Pacer {
	if clk == nil {
		clk = WallClock{}
	}
	if !(slowdown >= 1) {
		slowdown = 1
	}
	p := &Pacer{clk: clk, slowdown: slowdown, noise: noise}
	p.rng = rand.New(rand.NewPCG(noise.Seed^0x6465766963652d63, noise.Launch*0x9e3779b97f4a7c15+0x6c61756e6368))
	p.launchMul = logNormal(p.rng.NormFloat64(), noise.LaunchCV)
	p.stepMul = 1
	p.st.LaunchFactor = p.launchMul
	return p
}

// Step is a step in progress (from Begin to End).
type Step struct {
	base, realStart time.Time
}

// Begin starts a step. contiguous says the engine went straight from the previous step to this
// one (no idle wait): the step then starts at the previous step's modelled end.
func (p *Pacer) Begin(contiguous bool) Step {
	return p.BeginReady(contiguous, time.Time{})
}

// BeginReady is Begin for a step whose work became ready at ready (zero: unknown): after an idle
// wait, the step starts on the modelled timeline when its work arrived (the request that woke the
// engine), not when this machine's CPU got round to running the scheduler; the delay between the
// two (a wake-up on a loaded machine) is then repaid from the step's slack, or with catch-up from
// the following steps'. ready is ignored when contiguous, before the previous step's end or after
// now.
func (p *Pacer) BeginReady(contiguous bool, ready time.Time) Step {
	now := p.clk.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	base := now
	if contiguous && !p.deadline.IsZero() && p.deadline.Before(now) {
		base = p.deadline
	}
	if !contiguous && !ready.IsZero() && ready.Before(now) && !ready.Before(p.deadline) {
		base = ready
	}
	if !contiguous {
		// An idle engine has nothing to catch up on: a debt left from before the idle wait (a
		// warm-up's slow prefill) must not speed up the next burst of work (the next trial).
		p.debt = 0
	}
	return Step{base: base, realStart: now}
}

// factor is the multiplier of the next step's modelled time (slowdown, launch, step noise and
// drift), advancing the noise stream. Called with mu held.
func (p *Pacer) factor() float64 {
	n := p.noise
	if n.StepCV > 0 && (n.StepPeriod <= 0 || p.busy >= p.redrawAt) {
		p.stepMul = logNormal(p.rng.NormFloat64(), n.StepCV)
		if n.StepPeriod > 0 {
			p.redrawAt = p.busy + n.StepPeriod
		}
	}
	drift := math.Max(0.1, 1+n.DriftPerMinute*p.busy.Minutes())
	return p.slowdown * p.launchMul * p.stepMul * drift
}

// Paced is what End decided for one step.
type Paced struct {
	// Target is the step's paced modelled time (modelled × slowdown × noise); Real its real
	// compute time; Duration how long the step lasted from its start to its end.
	Target, Real, Duration time.Duration
	// Overrun: the real compute took longer than Target.
	Overrun bool
}

// End finishes step s, whose work the modelled model does in modelled: it waits until the
// step's end, start + max(real compute, paced modelled time), or until ctx is done.
func (p *Pacer) End(ctx context.Context, s Step, modelled time.Duration) Paced {
	now := p.clk.Now()
	p.mu.Lock()
	target := time.Duration(float64(modelled) * p.factor())
	real := now.Sub(s.realStart)
	end := s.base.Add(target)
	r := Paced{Target: target, Real: real, Overrun: real > target}
	if p.debt > 0 && end.After(now) {
		repay := min(p.debt, end.Sub(now))
		end = end.Add(-repay)
		p.debt -= repay
		p.st.Repaid += repay
	}
	if end.Before(now) {
		// The modelled timeline fell behind: by this step's own compute (an overrun) or by a
		// start later than the previous step's end by more than this step's modelled time (a
		// wake-up or a stall between steps, on a loaded machine). Either is a debt.
		p.debt = min(p.CatchUp, p.debt+now.Sub(end))
		end = now
	}
	r.Duration = end.Sub(s.base)
	p.deadline = end
	p.busy += modelled
	p.st.Steps++
	p.st.Modelled += target
	p.st.Real += real
	if r.Overrun {
		p.st.Overruns++
		p.st.WorstOverrun = max(p.st.WorstOverrun, real-target)
	}
	p.st.Slept += end.Sub(now)
	p.mu.Unlock()
	p.clk.SleepUntil(ctx, end)
	return r
}

// Stats returns a snapshot of the counters.
func (p *Pacer) Stats() PacerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}
