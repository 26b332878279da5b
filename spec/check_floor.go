package spec

import (
	"fmt"
	"math"
	"slices"

	"github.com/reckon-ci/reckon/internal/num"
)

// FloorParams are the fields of a floor check: bounds on a metric of each of its configs, read
// once per launch from the engine report or the GPU sampler, or (with Workload) the median over
// the config's trials of a metric of reckon's workload. Judged per config.
type FloorParams struct {
	// Configs are the configs the check applies to, in spec order; a floor written without
	// configs applies to every config (filled when the spec is linked).
	Configs []string `json:"configs,omitempty"`
	// Metric is an EngineReport metric (see EngineMetrics), or with Workload a metric of reckon's
	// workload (IsWorkloadMetric); both are names of the metric registry (internal/metric).
	Metric string `json:"metric,omitempty"`
	// Min and Max are inclusive bounds; at least one is set.
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
	// Workload is the workload whose trials' median is bounded (a result metric only).
	Workload string `json:"workload,omitempty"`
	// metricAt is where the metric field was written, for errors found after loading.
	metricAt *Error
}

func decodeFloor(b *builder, m *mapping, s *Spec) Params {
	p := &FloorParams{}
	p.Configs = b.refList(m)
	p.Metric = b.metric(m, true, func(s string) bool { return IsEngineMetric(s) || IsWorkloadMetric(s) },
		"the engine report, the GPU sampler or (with a workload) reckon's workload")
	p.metricAt = fieldAt(m, "metric")
	p.Workload = b.floorWorkload(m, p.Metric, s)
	p.Min = m.numberIn("min", -math.MaxFloat64, math.MaxFloat64, "a number")
	p.Max = m.numberIn("max", -math.MaxFloat64, math.MaxFloat64, "a number")
	switch {
	case !m.has("min") && !m.has("max"):
		m.missing("min", "a lower bound; or max, or both")
	case p.Min != nil && p.Max != nil && *p.Min > *p.Max:
		v, _ := m.get("max")
		m.badc(CodeConflict, v, "max", "max (%s) is below min (%s)", num.Exact(*p.Max), num.Exact(*p.Min))
	}
	return p
}

// floorWorkload reads a floor's workload: required (unless the spec has one workload) for a
// result metric, whose floor bounds the median over the config's trials of that workload, and
// rejected for an engine metric.
func (b *builder) floorWorkload(m *mapping, metric string, s *Spec) string {
	if metric == "" {
		m.get("workload")
		return ""
	}
	if IsEngineMetric(metric) {
		if v, ok := m.get("workload"); ok {
			m.badc(CodeConflict, v, "workload", "%s is an engine metric, read once per launch; workload applies to result metrics only", metric)
		}
		return ""
	}
	if m.has("workload") {
		return b.refStr(m, "workload", "workload", true)
	}
	m.known = append(m.known, "workload")
	switch len(s.Workloads) {
	case 1:
		return s.Workloads[0].Name
	case 0:
		m.missing("workload", "the workload whose trials give "+metric+", and a workloads section that defines it")
	default:
		m.missing("workload", "the workload whose trials give "+metric+"; required when the spec has more than one workload")
	}
	return ""
}

// Scope: a floor judges each of its configs alone.
func (p *FloorParams) Scope() Scope { return ScopePerConfig }

// ConfigNames returns the floor's configs.
func (p *FloorParams) ConfigNames() []string { return p.Configs }

// link: a floor written without configs applies to every config.
func (p *FloorParams) link(l *linker, _ *Check) {
	if len(p.Configs) == 0 {
		p.Configs = append([]string(nil), l.configNames...)
	}
}

func (p *FloorParams) validate(l *linker, c *Check) {
	l.checkGoodput(c, p.Metric, p.Workload, p.metricAt)
}

func (p *FloorParams) workloadFor(config string) string {
	if p.Workload != "" && (len(p.Configs) == 0 || slices.Contains(p.Configs, config)) {
		return p.Workload
	}
	return ""
}

func (p *FloorParams) engineMetric() (string, *Error) {
	if p.Workload != "" {
		return "", nil
	}
	return p.Metric, p.metricAt
}

// name: "floor kv_cache_tokens >= 20000", "floor 1 <= m <= 2 (decode)".
func (p *FloorParams) name(CheckKind) string {
	s := "floor "
	switch {
	case p.Min != nil && p.Max != nil:
		s += fmt.Sprintf("%s <= %s <= %s", num.Exact(*p.Min), p.Metric, num.Exact(*p.Max))
	case p.Min != nil:
		s += fmt.Sprintf("%s >= %s", p.Metric, num.Exact(*p.Min))
	case p.Max != nil:
		s += fmt.Sprintf("%s <= %s", p.Metric, num.Exact(*p.Max))
	default:
		s += p.Metric
	}
	if p.Workload != "" {
		s += " (" + p.Workload + ")"
	}
	return s
}
