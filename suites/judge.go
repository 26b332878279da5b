package suites

import (
	"fmt"
	"slices"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// Record, then judge. What one config recorded (its engine report, the allreduce evidence, its
// trials with their launches, its failed measurements, its GPU memory peak, why its engine was
// not up) is its evidence: the one value every per-config check judges. A live run builds it
// from the config's state once the evidence a check reads is complete (start-up evidence after
// the first launch's readiness; trials after the config's last launch), and reckon merge builds
// it the same way from a shard's results.json (replay), so both judge through configVerdict.

// evidence is one config's recorded evidence.
type evidence struct {
	name string
	// engine is the engine report as recorded (results' configs[].engine), addressed by key.
	engine map[string]any
	// allreduce is the evidence of the allreduce the engine ran (nil: not gathered).
	allreduce *gate.AllReduceEvidence
	// trials[workload] are the trials' metrics, every launch, in order; trialLaunch[workload]
	// the launch of each.
	trials      map[string][]map[string]float64
	trialLaunch map[string][]int
	// measErr[workload] is why the workload's trials failed.
	measErr map[string]error
	// peakGPUMemGiB is the highest memory use of one GPU while the config ran (nil: not sampled).
	peakGPUMemGiB *float64
	// down is why the engine was not up for the checks (did not start, exited during the run,
	// was not launched); nil when it was.
	down error
	// startupOnly says the engine's start-up alone was recorded (it never became ready, so a
	// log it left is partial): a check is then an error, never judged on it.
	startupOnly bool
	logPath     string
}

// evidence returns the config's recorded evidence as of now.
func (cs *configState) evidence() *evidence {
	ev := &evidence{
		name: cs.name, engine: cs.out.Engine, allreduce: cs.allreduce,
		trials: cs.trials, trialLaunch: cs.trialLaunch, measErr: cs.measErr,
		down: cs.infraError(), logPath: cs.logPath,
	}
	ev.startupOnly = ev.down != nil && (cs.report == nil || cs.launchEr != nil || (cs.inst == nil && !cs.replayed))
	if len(cs.out.GPUPeakMiB) > 0 { // recorded when the run stopped the engine
		peak := slices.Max(cs.out.GPUPeakMiB) / 1024
		ev.peakGPUMemGiB = &peak
	} else if v := cs.peakGPUMemGiB(); v != nil {
		ev.peakGPUMemGiB = v
	}
	return ev
}

// infraError is why the engine was not up (nil when it was).
func (ev *evidence) infraError() error { return ev.down }

// configVerdict judges a per-config check over the config's evidence: the one path of a live
// run and of reckon merge. An engine that never became ready is not judged on the partial log
// it left: its checks are errors, never passes.
func configVerdict(k configKind, ev *evidence, c *spec.Check) gate.Verdict {
	if ev.startupOnly {
		return errVerdict(c, ev.name, ev.down)
	}
	return k.judge(ev, c)
}

// engineValue reads a numeric engine-report field of the evidence by its JSON key (peak GPU
// memory from the GPU sampler's record).
func engineValue(ev *evidence, metric string) (*float64, error) {
	if metric == metricPeakGPUMem {
		if ev.peakGPUMemGiB != nil {
			return ev.peakGPUMemGiB, nil
		}
		return nil, fmt.Errorf("config %s: %s needs GPU memory sampling (nvidia-smi), which this testbed does not have", ev.name, metric)
	}
	if ev.engine == nil {
		return nil, fmt.Errorf("config %s: no engine report (log %s unreadable)", ev.name, ev.logPath)
	}
	raw, ok := ev.engine[metric]
	if !ok {
		return nil, fmt.Errorf("config %s: the engine report has no field %q", ev.name, metric)
	}
	if raw == nil {
		return nil, nil
	}
	switch f := raw.(type) {
	case float64:
		return &f, nil
	case int:
		x := float64(f)
		return &x, nil
	case int64:
		x := float64(f)
		return &x, nil
	}
	return nil, fmt.Errorf("config %s: engine report field %q is %v, not a number", ev.name, metric, raw)
}
