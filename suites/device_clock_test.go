package suites

import (
	"strings"
	"testing"
)

func TestParseDeviceClock(t *testing.T) {
	got, ok := parseDeviceClock([]byte(`{"version":"0.4.10","refengine":{"clock":"modelled","device_clock":{"steps":265,"cpu_overrun_steps":26,"modelled_s":3.7}}}`))
	if !ok || got.Steps != 265 || got.Overruns != 26 {
		t.Errorf("modelled clock: %+v %v", got, ok)
	}
	for _, body := range []string{
		`{"refengine":{"clock":"wall","device_clock":null}}`, // the wall clock
		`{"version":"0.5.0"}`,                                // a real engine
		`not json`,
	} {
		if got, ok := parseDeviceClock([]byte(body)); ok {
			t.Errorf("%s: %+v, want no device clock", body, got)
		}
	}
}

// TestOverrunWarning: the figures measured on a 2-core slice (docs/refengine.md): 8 of 258 steps
// idle is no warning, 26 of 265 with two busy loops is.
func TestOverrunWarning(t *testing.T) {
	if w := overrunWarning(deviceClockCount{Steps: 100, Overruns: 2}, deviceClockCount{Steps: 358, Overruns: 10}); w != "" {
		t.Errorf("idle box (8 of 258 steps): %q, want none", w)
	}
	w := overrunWarning(deviceClockCount{Steps: 100, Overruns: 2}, deviceClockCount{Steps: 365, Overruns: 28})
	if !strings.Contains(w, "26 of 265 steps (10%)") || !strings.Contains(w, clockOverrunMarker) {
		t.Errorf("loaded box: %q", w)
	}
	if w := overrunWarning(deviceClockCount{Steps: 5}, deviceClockCount{Steps: 5}); w != "" {
		t.Errorf("no steps: %q", w)
	}
}
