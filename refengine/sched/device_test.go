package sched

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/refengine/device"
	"github.com/reckon-ci/reckon/refengine/interconnect"
)

// stepClock is a fake device clock: time moves only by the pacer's sleeps (real compute counts
// as zero), so a step lasts exactly its paced modelled time.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) SleepUntil(_ context.Context, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

func deviceSched(t *testing.T, slowdown float64, spec bool) (*Scheduler, *stepClock) {
	t.Helper()
	gpu, _ := device.LookupGPU("h100")
	m, _ := device.LookupModel("llama-3.1-70b")
	clk := &stepClock{now: time.Unix(1_700_000_000, 0)}
	dc := &DeviceClock{
		Timer: device.Timer{GPU: gpu, Model: m, TP: 2, Comm: device.Comm{Interconnect: interconnect.GPUScale(interconnect.NVLink), Custom: true, CustomMaxBytes: 8 << 20}},
		Pacer: device.NewPacer(clk, slowdown, device.Noise{}),
	}
	return newSched(t, Config{Slowdown: slowdown, Device: dc}, 64, spec), clk
}

// TestDeviceClockPacesSteps: on the modelled clock every step is paced by the device clock and
// lasts the modelled model's time of its forwards (compute + communication), exactly F times
// longer with --fault-slowdown F; the engine's time is the sum of its steps.
func TestDeviceClockPacesSteps(t *testing.T) {
	var base time.Duration
	for _, f := range []float64{1, 1.5} {
		s, clk := deviceSched(t, f, false)
		t0 := clk.Now()
		if o := run(t, s, req(1, 20)); len(o.tokens) != 20 {
			t.Fatalf("got %d tokens", len(o.tokens))
		}
		st := s.Stats()
		d := st.Device
		if d.Steps != st.DecodeSteps+st.PrefillSteps || d.Steps < 20 {
			t.Errorf("slowdown %v: %d paced steps for %d decode + %d prefill", f, d.Steps, st.DecodeSteps, st.PrefillSteps)
		}
		modelled := st.DeviceCompute + st.CommTime
		if want := time.Duration(float64(modelled) * f); absDur(d.Modelled-want) > time.Duration(d.Steps) {
			t.Errorf("slowdown %v: paced %v, want %v x %v", f, d.Modelled, f, modelled)
		}
		if el := clk.Now().Sub(t0); absDur(el-d.Modelled) > time.Microsecond {
			t.Errorf("slowdown %v: the engine's clock moved %v for %v of paced steps", f, el, d.Modelled)
		}
		if d.Overruns != 0 {
			t.Errorf("overruns on a clock where compute takes no time: %d", d.Overruns)
		}
		if f == 1 {
			base = d.Modelled
		} else if want := time.Duration(float64(base) * f); absDur(d.Modelled-want) > time.Duration(d.Steps) {
			t.Errorf("slowdown 1.5: %v, want exactly 1.5 x %v", d.Modelled, base)
		}
	}
}

// TestDeviceClockSpeculative: speculative rounds are paced too, with the draft forwards and the
// round's host overhead in the modelled time.
func TestDeviceClockSpeculative(t *testing.T) {
	s, _ := deviceSched(t, 1, true)
	run(t, s, req(2, 24))
	st := s.Stats()
	if st.SpecVerifies == 0 || st.Device.Steps != st.DecodeSteps+st.PrefillSteps {
		t.Fatalf("stats %+v", st)
	}
	if st.Device.Modelled != st.DeviceCompute+st.CommTime {
		t.Errorf("paced %v, modelled %v + %v", st.Device.Modelled, st.DeviceCompute, st.CommTime)
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
