package spec

import (
	"fmt"
	"strings"

	"github.com/reckon-ci/reckon/internal/metric"
)

// EngineMetrics are the metrics that floor and relative checks may bound once per launch: those
// of the engine report (the numeric keys of `reckon logs parse --json`) and peak_gpu_mem_gib from
// the GPU memory sampler (the largest peak over the GPUs), in the metric registry's order
// (internal/metric, docs/metrics.md).
var EngineMetrics = metric.Names(metric.Produced(metric.EngineReport | metric.GPUSampler))

// IsEngineMetric reports whether name is one of EngineMetrics.
func IsEngineMetric(name string) bool {
	m, ok := metric.Lookup(name)
	return ok && m.Sources.Has(metric.EngineReport|metric.GPUSampler)
}

// IsWorkloadMetric reports whether reckon's own workload measures the metric in every trial (a
// floor with a workload may bound its median over the trials).
func IsWorkloadMetric(name string) bool {
	m, ok := metric.Lookup(name)
	return ok && m.Sources.Has(metric.Workload)
}

// IsResultMetric reports whether a statistical check (throughput, latency) may name the metric:
// reckon's workload measures it in every trial and the registry knows which way it improves.
// Latency metrics are STAT_QUANTITY_ms with exactly the statistics and quantities the workload
// reports (metric.LatencyStats, metric.LatencyQuantities): median_tpot_ms is one, p75_tpot_ms
// and p99_e2e_ms are not.
func IsResultMetric(name string) bool {
	m, ok := metric.Lookup(name)
	return ok && m.Sources.Has(metric.Workload) && m.Comparable()
}

// metricsWhere returns the registry's names, engine report and GPU sampler metrics first, for
// which keep is true.
func metricsWhere(keep func(string) bool) []string {
	var out []string
	for _, m := range metric.All() {
		if keep(m.Name) {
			out = append(out, m.Name)
		}
	}
	return out
}

// fromWorkload names the source of a statistical check's metric.
const fromWorkload = "reckon's workload"

// metric reads a check's metric: a name of the metric registry (internal/metric) that valid
// accepts, valid being what the sources named by from (e.g. "reckon's workload") produce for this
// kind of check. Any other name is an error at the metric field that lists the metrics the check
// can gate, and for a name the registry knows, why this check could never judge it.
func (b *builder) metric(m *mapping, required bool, valid func(string) bool, from string) string {
	gateable := metricsWhere(valid)
	expected := "one of the metrics " + from + " produces: " + strings.Join(gateable, ", ")
	s, ok := m.str("metric")
	if !ok {
		if required && !m.has("metric") {
			m.missing("metric", expected)
		}
		return ""
	}
	if valid(s) {
		return s
	}
	v := m.entries[m.index["metric"]].value
	r, known := metric.Lookup(s)
	switch {
	case !known:
		m.badc(CodeUnknownMetric, v, "metric", "unknown metric %q (expected %s)", s, expected)
	case from == fromWorkload && r.Sources.Has(metric.Workload) && !r.Comparable():
		m.badc(CodeUnknownMetric, v, "metric", "%s has no better direction (a count or a setting), so %s cannot compare it; a floor can bound it (expected %s)", s, m.what, expected)
	default:
		m.badc(CodeUnmeasured, v, "metric", "%s is not produced by %s (its sources: %s), so this check could never judge it (expected %s)", s, from, r.Sources, expected)
	}
	return ""
}

// checkGoodput rejects a check on request_goodput (or goodput) of a workload that sets no
// goodput SLOs: the metric would never be measured. at is where the metric was written (nil:
// the check's position).
func (l *linker) checkGoodput(c *Check, name, workload string, at *Error) {
	if name != "request_goodput" && name != "goodput" || workload == "" {
		return
	}
	w, ok := l.s.Workload(workload)
	if !ok || len(w.Goodput) > 0 {
		return
	}
	msg := fmt.Sprintf("%s needs goodput SLOs on workload %q (goodput: {ttft_ms: 500, tpot_ms: 50}); without them no request is judged and the metric is never measured", name, w.Name)
	if at != nil {
		e := *at
		e.Code, e.Msg = CodeMissingField, msg
		l.errs = append(l.errs, &e)
		return
	}
	l.errorc(CodeMissingField, l.checkNode[c], l.checkPath[c], "%s", msg)
}

// unreported is the error of UnreportedMetrics for a floor or relative check on name, which
// the spec's engine kind never reports (at: where the metric was written).
func (s *Spec) unreported(c *Check, name string, at *Error, reported []string) *Error {
	e := Error{File: s.File, Line: c.Line, Column: 1}
	if at != nil {
		e = *at
	}
	e.Code, e.Msg = CodeUnmeasured, fmt.Sprintf("%s's logs never report %s, so this %s check could never be judged; expected one of %s", s.Engine.Kind, name, c.Kind, strings.Join(append(append([]string(nil), reported...), MetricPeakGPUMem), ", "))
	return &e
}
