// The reference engine's device clock during a workload's trials: whether its real CPU compute,
// rather than the modelled GPU, set the pace of the steps the trials measured.

package suites

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// overrunWarnShare is the share of a workload's steps whose real CPU compute overran the
// modelled step time above which its trials are said to measure the machine's CPU. An idle
// 2-core box overran about 3% of steps (prefills) with eight requests in flight; two busy loops
// beside it made that 10% and moved throughput 8-16% (docs/refengine.md, "Device clock").
const overrunWarnShare = 0.05

// clockOverrunMarker identifies the overrun warning among a workload's trial warnings.
const clockOverrunMarker = "overran its device clock"

// deviceClockCount is what the reference engine's device clock has counted since its launch
// (/server_info's refengine.device_clock): steps paced, and those whose real compute overran.
type deviceClockCount struct {
	Steps    int64 `json:"steps"`
	Overruns int64 `json:"cpu_overrun_steps"`
}

// readDeviceClock asks the engine for its device clock's counters. ok is false for every engine
// without one (real engines, the reference engine on the wall clock) and when the engine does
// not answer: the counters only add a warning, never decide a check.
func (fw *framework) readDeviceClock(ctx context.Context, cs *configState) (deviceClockCount, bool) {
	if cs.inst == nil {
		return deviceClockCount{}, false
	}
	base := strings.TrimRight(cs.inst.BaseURL(), "/")
	body, err := httpGet(ctx, base+"/server_info")
	if err != nil {
		body, err = httpGet(ctx, base+"/get_server_info")
	}
	if err != nil {
		return deviceClockCount{}, false
	}
	return parseDeviceClock(body)
}

// parseDeviceClock reads refengine.device_clock's counters from a /server_info body.
func parseDeviceClock(body []byte) (deviceClockCount, bool) {
	var info struct {
		RefEngine struct {
			DeviceClock *deviceClockCount `json:"device_clock"`
		} `json:"refengine"`
	}
	if err := json.Unmarshal(body, &info); err != nil || info.RefEngine.DeviceClock == nil {
		return deviceClockCount{}, false
	}
	return *info.RefEngine.DeviceClock, true
}

// overrunWarning is the warning for the steps between two readings of the device clock ("" when
// the real compute kept within the modelled time often enough, or nothing was counted).
func overrunWarning(before, after deviceClockCount) string {
	steps, overruns := after.Steps-before.Steps, after.Overruns-before.Overruns
	if steps <= 0 || overruns < 0 || float64(overruns) <= overrunWarnShare*float64(steps) {
		return ""
	}
	return fmt.Sprintf("the reference engine's CPU compute "+clockOverrunMarker+" in %d of %d steps (%.0f%%): this machine's CPU, not the modelled GPU, set part of the throughput; lower the workload's concurrency or unload the machine (docs/refengine.md, \"Device clock\")",
		overruns, steps, 100*float64(overruns)/float64(steps))
}

// noteClockOverruns adds to a statistical verdict that the reference engine's device clock was
// overrun while the trials it compares ran (on either side): the verdict then stands, but says
// that part of what it measured was this machine's CPU.
func (fw *framework) noteClockOverruns(c *spec.Check, v *gate.Verdict) {
	p := c.Stat()
	names := []string{p.Config}
	if p.Against == spec.AgainstConfig {
		names = append(names, p.AgainstConfig)
	}
	var notes, overrun []string
	for _, name := range names {
		cs := fw.configs[name]
		if cs == nil {
			continue
		}
		for _, w := range cs.trialWarnings[p.Workload] {
			if strings.Contains(w, clockOverrunMarker) {
				notes = append(notes, name+": "+w)
				overrun = append(overrun, name)
			}
		}
	}
	if len(notes) == 0 {
		return
	}
	v.Message += "; warning: the device clock was overrun (" + strings.Join(overrun, ", ") + "), see details"
	if v.Details != "" {
		v.Details += "\n"
	}
	v.Details += strings.Join(notes, "\n")
}
