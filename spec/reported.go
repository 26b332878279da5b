package spec

import (
	"github.com/reckon-ci/reckon/internal/metric"
)

// MetricPeakGPUMem is the engine metric reckon samples itself (nvidia-smi) instead of reading it
// from the engine's logs; every engine kind has it on a GPU testbed.
const MetricPeakGPUMem = metric.PeakGPUMemGiB

// UnreportedMetrics returns an error at the metric field of every floor and relative check whose
// metric the spec's engine kind never reports: such a check could only ever error at run time.
// reported lists the EngineReport values the kind's log parser can give; spec does not import the
// engine adapters, so the caller (the gate, `reckon spec check`) passes the adapter's list.
func (s *Spec) UnreportedMetrics(reported []string) ErrorList {
	have := map[string]bool{MetricPeakGPUMem: true}
	for _, m := range reported {
		have[m] = true
	}
	var out ErrorList
	for _, c := range s.Checks {
		p, ok := c.Params.(engineMetricParams)
		if !ok {
			continue
		}
		if name, at := p.engineMetric(); name != "" && !have[name] {
			out = append(out, s.unreported(c, name, at, reported))
		}
	}
	return out
}

// engineMetricParams is implemented by the parameters of the kinds that bound a value of the
// engine report (floor, relative).
type engineMetricParams interface {
	// engineMetric returns the engine metric the check bounds ("" when it bounds none, e.g. a
	// floor on a result metric) and where it was written.
	engineMetric() (name string, at *Error)
}
