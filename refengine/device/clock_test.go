package device

import (
	"context"
	"math"
	"testing"
	"time"
)

// fakeClock is a manual clock: Now moves only when the test advances it or when SleepUntil
// "sleeps" (it jumps to the wake-up time plus Oversleep, as a timer that wakes late would).
type fakeClock struct {
	now       time.Time
	Oversleep time.Duration
	sleeps    []time.Duration
}

func newFake() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) advance(d time.Duration) { c.now = c.now.Add(d) }
func (c *fakeClock) SleepUntil(_ context.Context, t time.Time) {
	if d := t.Sub(c.now); d > 0 {
		c.sleeps = append(c.sleeps, d)
		c.now = t.Add(c.Oversleep)
	}
}

// step runs one paced step whose real compute takes real and whose modelled time is modelled.
func step(p *Pacer, c *fakeClock, contiguous bool, real, modelled time.Duration) (Paced, time.Duration) {
	t0 := c.Now()
	s := p.Begin(contiguous)
	c.advance(real)
	r := p.End(context.Background(), s, modelled)
	return r, c.Now().Sub(t0)
}

func TestStepLastsTheLongerOfRealAndModelled(t *testing.T) {
	for _, tc := range []struct {
		real, modelled, want time.Duration
		overrun              bool
	}{
		{3 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, false},
		{15 * time.Millisecond, 10 * time.Millisecond, 15 * time.Millisecond, true},
		{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, false},
		{0, 0, 0, false},
	} {
		c := newFake()
		p := NewPacer(c, 1, Noise{})
		r, took := step(p, c, false, tc.real, tc.modelled)
		if took != tc.want || r.Duration != tc.want || r.Overrun != tc.overrun || r.Real != tc.real {
			t.Errorf("real %v modelled %v: took %v (reported %v, overrun %v), want %v (overrun %v)", tc.real, tc.modelled, took, r.Duration, r.Overrun, tc.want, tc.overrun)
		}
	}
}

func TestContiguousStepsAbsorbLateWakeups(t *testing.T) {
	c := newFake()
	c.Oversleep = 400 * time.Microsecond // every timer wakes 0.4 ms late
	p := NewPacer(c, 1, Noise{})
	t0 := c.Now()
	const n = 100
	for i := 0; i < n; i++ {
		step(p, c, i > 0, time.Millisecond, 5*time.Millisecond)
	}
	// 100 steps of 5 ms: the lateness of one wake-up is absorbed by the next step's start.
	if got, want := c.Now().Sub(t0), n*5*time.Millisecond+c.Oversleep; got != want {
		t.Errorf("100 contiguous 5 ms steps took %v, want %v", got, want)
	}
	// After an idle wait the step starts when it really starts.
	c.advance(time.Second)
	_, took := step(p, c, false, time.Millisecond, 5*time.Millisecond)
	if took != 5*time.Millisecond+c.Oversleep {
		t.Errorf("step after idle took %v", took)
	}
}

func TestSlowdownIsExact(t *testing.T) {
	for _, f := range []float64{1, 1.07, 1.5, 3} {
		c := newFake()
		p := NewPacer(c, f, Noise{})
		var total time.Duration
		for i := 0; i < 50; i++ {
			r, took := step(p, c, i > 0, 2*time.Millisecond, 10*time.Millisecond)
			if want := time.Duration(float64(10*time.Millisecond) * f); r.Target != want || took != want {
				t.Fatalf("slowdown %v: step target %v took %v, want %v", f, r.Target, took, want)
			}
			total += r.Duration
		}
		if want := time.Duration(50 * float64(10*time.Millisecond) * f); total != want {
			t.Errorf("slowdown %v: 50 steps %v, want %v", f, total, want)
		}
	}
	// Below 1 counts as 1.
	if p := NewPacer(newFake(), 0.5, Noise{}); p.slowdown != 1 {
		t.Errorf("slowdown 0.5 became %v", p.slowdown)
	}
}

func TestOverrunCounter(t *testing.T) {
	c := newFake()
	p := NewPacer(c, 1, Noise{})
	reals := []time.Duration{1, 12, 3, 20, 10, 11}
	for i, r := range reals {
		step(p, c, i > 0, r*time.Millisecond, 10*time.Millisecond)
	}
	st := p.Stats()
	if st.Steps != 6 || st.Overruns != 3 || st.WorstOverrun != 10*time.Millisecond {
		t.Errorf("stats %+v: want 6 steps, 3 overruns, worst 10ms", st)
	}
	if st.Modelled != 60*time.Millisecond || st.Real != 57*time.Millisecond {
		t.Errorf("modelled %v real %v", st.Modelled, st.Real)
	}
}

func TestCatchUpRepaysOverrunsFromSlack(t *testing.T) {
	c := newFake()
	p := NewPacer(c, 1, Noise{})
	p.CatchUp = 8 * time.Millisecond
	t0 := c.Now()
	step(p, c, false, 15*time.Millisecond, 10*time.Millisecond) // 5 ms over
	r, took := step(p, c, true, 2*time.Millisecond, 10*time.Millisecond)
	if took != 5*time.Millisecond || r.Duration != 5*time.Millisecond {
		t.Errorf("the step after a 5 ms overrun took %v (duration %v), want 5ms", took, r.Duration)
	}
	if got := c.Now().Sub(t0); got != 20*time.Millisecond {
		t.Errorf("two 10 ms steps with catch-up took %v, want 20ms", got)
	}
	// Never before the step's own real compute ends; the rest of the debt carries over.
	step(p, c, true, 30*time.Millisecond, 10*time.Millisecond) // 20 ms over, capped at 8
	r, _ = step(p, c, true, 7*time.Millisecond, 10*time.Millisecond)
	if r.Duration != 7*time.Millisecond {
		t.Errorf("repaying step lasted %v, want its real 7ms", r.Duration)
	}
	r, _ = step(p, c, true, time.Millisecond, 10*time.Millisecond)
	if r.Duration != 5*time.Millisecond { // 8 − 3 repaid = 5 left
		t.Errorf("next step lasted %v, want 5ms", r.Duration)
	}
	if st := p.Stats(); st.Repaid != 5*time.Millisecond+3*time.Millisecond+5*time.Millisecond || st.Overruns != 2 {
		t.Errorf("stats %+v", st)
	}
	// An idle wait clears the debt: the next burst (the next trial) is not sped up.
	step(p, c, true, 30*time.Millisecond, 10*time.Millisecond)
	c.advance(time.Second)
	if r, _ := step(p, c, false, time.Millisecond, 10*time.Millisecond); r.Duration != 10*time.Millisecond {
		t.Errorf("the first step after idle lasted %v, want its modelled 10ms", r.Duration)
	}
}

// TestCatchUpRepaysStallsBetweenSteps: a stall between two contiguous steps (the scheduler's
// goroutine not run for longer than a step, on a loaded machine) is not an overrun of the step's
// compute, yet the modelled timeline lost it; the following steps repay it from their slack, so
// the burst ends when its modelled steps say. Without catch-up the stall is lost.
func TestCatchUpRepaysStallsBetweenSteps(t *testing.T) {
	for _, tc := range []struct {
		catchUp, want time.Duration
	}{
		{time.Second, 20 * 10 * time.Millisecond},         // repaid
		{0, 20*10*time.Millisecond + 27*time.Millisecond}, // lost: the 35 ms stall and the step's 2 ms compute, less its 10 ms
	} {
		c := newFake()
		p := NewPacer(c, 1, Noise{})
		p.CatchUp = tc.catchUp
		t0 := c.Now()
		for i := 0; i < 20; i++ {
			if i == 5 {
				c.advance(35 * time.Millisecond) // the step starts 35 ms after the previous one's end
			}
			r, _ := step(p, c, i > 0, 2*time.Millisecond, 10*time.Millisecond)
			if r.Overrun {
				t.Errorf("catch-up %v: step %d counted as a CPU overrun", tc.catchUp, i)
			}
		}
		if got := c.Now().Sub(t0); got != tc.want {
			t.Errorf("catch-up %v: 20 steps of 10 ms with a 35 ms stall took %v, want %v", tc.catchUp, got, tc.want)
		}
	}
}

// TestBeginReadyStartsAtTheArrival: after an idle wait, a burst whose first request arrived 30 ms
// before the scheduler ran (a late wake-up) ends when its modelled steps say, counted from the
// arrival; a ready time before the previous step's end or in the future is ignored.
func TestBeginReadyStartsAtTheArrival(t *testing.T) {
	c := newFake()
	p := NewPacer(c, 1, Noise{})
	p.CatchUp = time.Second
	step(p, c, false, time.Millisecond, 10*time.Millisecond)
	c.advance(time.Second) // idle
	ready := c.Now()
	c.advance(30 * time.Millisecond) // the scheduler runs 30 ms after the request arrived
	for i := 0; i < 20; i++ {
		var s Step
		if i == 0 {
			s = p.BeginReady(false, ready)
		} else {
			s = p.BeginReady(true, time.Time{})
		}
		c.advance(2 * time.Millisecond)
		p.End(context.Background(), s, 10*time.Millisecond)
	}
	if got, want := c.Now().Sub(ready), 20*10*time.Millisecond; got != want {
		t.Errorf("20 steps of 10 ms from the arrival took %v, want %v", got, want)
	}
	for _, r := range []time.Time{c.Now().Add(-time.Hour), c.Now().Add(time.Second)} {
		c.advance(time.Second)
		t0 := c.Now()
		s := p.BeginReady(false, r)
		p.End(context.Background(), s, 10*time.Millisecond)
		if got := c.Now().Sub(t0); got != 10*time.Millisecond {
			t.Errorf("ready %v: step took %v, want 10ms from its start", r.Sub(t0), got)
		}
	}
}

// factors runs n steps of 1 s modelled time and returns their paced factors.
func factors(noise Noise, n int) []float64 {
	c := newFake()
	p := NewPacer(c, 1, noise)
	out := make([]float64, n)
	for i := range out {
		r, _ := step(p, c, i > 0, 0, time.Second)
		out[i] = r.Target.Seconds()
	}
	return out
}

func meanCV(xs []float64) (float64, float64) {
	var s, s2 float64
	for _, x := range xs {
		s += x
	}
	m := s / float64(len(xs))
	for _, x := range xs {
		s2 += (x - m) * (x - m)
	}
	return m, math.Sqrt(s2/float64(len(xs)-1)) / m
}

func TestWithinLaunchNoiseStatistics(t *testing.T) {
	for _, cv := range []float64{0.01, 0.05, 0.2} {
		f := factors(Noise{StepCV: cv, Seed: 7}, 40000)
		m, got := meanCV(f)
		// Standard errors at n = 40000: mean cv/200, CV about cv/280.
		if math.Abs(m-1) > 4*cv/200 || math.Abs(got-cv) > 0.03*cv+4*cv/280 {
			t.Errorf("step CV %v: mean %.5f, CV %.5f", cv, m, got)
		}
	}
	// The same seed and launch give the same draws; another seed other ones.
	a, b, o := factors(Noise{StepCV: 0.05, Seed: 7}, 10), factors(Noise{StepCV: 0.05, Seed: 7}, 10), factors(Noise{StepCV: 0.05, Seed: 8}, 10)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("not reproducible at %d: %v vs %v", i, a[i], b[i])
		}
	}
	if a[0] == o[0] && a[1] == o[1] {
		t.Errorf("seeds 7 and 8 drew the same factors")
	}
}

func TestStepPeriodHoldsTheDraw(t *testing.T) {
	// Each step is 1 s of modelled time; a 10 s period redraws every 10 steps.
	f := factors(Noise{StepCV: 0.1, StepPeriod: 10 * time.Second, Seed: 3}, 100)
	for i := range f {
		if same := f[i] == f[i/10*10]; !same {
			t.Fatalf("step %d: factor %v differs from its period's first %v", i, f[i], f[i/10*10])
		}
	}
	if f[0] == f[10] {
		t.Errorf("no redraw after the period")
	}
}

func TestBetweenLaunchNoise(t *testing.T) {
	const cv = 0.1
	var fs []float64
	for l := uint64(0); l < 4000; l++ {
		p := NewPacer(newFake(), 1, Noise{LaunchCV: cv, Seed: 11, Launch: l})
		fs = append(fs, p.Stats().LaunchFactor)
	}
	m, got := meanCV(fs)
	if math.Abs(m-1) > 4*cv/math.Sqrt(4000) || math.Abs(got-cv) > 0.1*cv {
		t.Errorf("launch CV %v over 4000 launches: mean %.4f, CV %.4f", cv, m, got)
	}
	a := NewPacer(newFake(), 1, Noise{LaunchCV: cv, Seed: 11, Launch: 5}).Stats().LaunchFactor
	if a != fs[5] {
		t.Errorf("launch 5 drew %v, then %v", fs[5], a)
	}
	// Within a launch the launch factor multiplies every step the same.
	f := factors(Noise{LaunchCV: cv, Seed: 11, Launch: 5}, 20)
	for _, x := range f {
		if math.Abs(x-a) > 1e-9 {
			t.Fatalf("step factor %v, want the launch's %v", x, a)
		}
	}
}

func TestDrift(t *testing.T) {
	// 10% per minute of modelled busy time: after 60 steps of 1 s the factor is 1.1.
	f := factors(Noise{DriftPerMinute: 0.1}, 121)
	for _, i := range []int{0, 60, 120} {
		want := 1 + 0.1*float64(i)/60
		if math.Abs(f[i]-want) > 1e-3*want+0.002 {
			t.Errorf("step %d: factor %v, want %v", i, f[i], want)
		}
	}
}

func TestNoiseValidate(t *testing.T) {
	for _, n := range []Noise{{StepCV: -1}, {LaunchCV: 3}, {DriftPerMinute: math.NaN()}, {StepPeriod: -time.Second}} {
		if n.Validate() == nil {
			t.Errorf("%+v accepted", n)
		}
	}
	if err := (Noise{StepCV: 0.05, LaunchCV: 0.03, DriftPerMinute: 0.01}).Validate(); err != nil {
		t.Error(err)
	}
}
