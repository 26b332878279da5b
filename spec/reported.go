package spec

import (
	"fmt"
	"strings"

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
		if (c.Kind != KindFloor && c.Kind != KindRelative) || c.Metric == "" || have[c.Metric] || c.IsResultFloor() {
			continue
		}
		e := Error{File: s.File, Line: c.Line, Column: 1}
		if c.metricAt != nil {
			e = *c.metricAt
		}
		e.Code, e.Msg = CodeUnmeasured, fmt.Sprintf("%s's logs never report %s, so this %s check could never be judged; expected one of %s", s.Engine.Kind, c.Metric, c.Kind, strings.Join(append(append([]string(nil), reported...), MetricPeakGPUMem), ", "))
		out = append(out, &e)
	}
	return out
}
