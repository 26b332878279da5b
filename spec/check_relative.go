package spec

import (
	"fmt"
	"math"
	"strings"

	"github.com/reckon-ci/reckon/internal/num"
)

// RelativeParams are the fields of a relative check: MinRatio <= value(Config)/value(Of) <=
// MaxRatio for an engine-report metric, Of being another config of the run or OfBaseline.
type RelativeParams struct {
	// Metric is an EngineReport metric (see EngineMetrics).
	Metric string `json:"metric,omitempty"`
	// Config is the config being judged.
	Config string `json:"config,omitempty"`
	// Of is the config it is compared with, or OfBaseline: the same config's engine report
	// stored in this testbed's baseline.
	Of string `json:"of,omitempty"`
	// MinRatio and MaxRatio are inclusive bounds on the ratio; at least one is set.
	MinRatio *float64 `json:"min_ratio,omitempty"`
	MaxRatio *float64 `json:"max_ratio,omitempty"`
	// metricAt is where the metric field was written, for errors found after loading.
	metricAt *Error
}

func decodeRelative(b *builder, m *mapping, _ *Spec) Params {
	p := &RelativeParams{}
	p.Config = b.refStr(m, "config", "config", true)
	if of, _ := m.str("of"); of == OfBaseline {
		p.Of = OfBaseline
	} else {
		p.Of = b.refStr(m, "of", "config", true)
	}
	if p.Config != "" && p.Config == p.Of {
		v, _ := m.get("of")
		m.badc(CodeConflict, v, "of", "a config compared with itself (%q) always passes; name another config", p.Of)
	}
	p.Metric = b.metric(m, true, IsEngineMetric, "the engine report or the GPU sampler")
	p.metricAt = fieldAt(m, "metric")
	p.MinRatio = m.numberIn("min_ratio", 0, math.MaxFloat64, "a ratio >= 0")
	p.MaxRatio = m.numberIn("max_ratio", 0, math.MaxFloat64, "a ratio >= 0")
	switch {
	case !m.has("min_ratio") && !m.has("max_ratio"):
		m.missing("min_ratio", "a lower bound on the ratio; or max_ratio, or both")
	case p.MinRatio != nil && p.MaxRatio != nil && *p.MinRatio > *p.MaxRatio:
		v, _ := m.get("max_ratio")
		m.badc(CodeConflict, v, "max_ratio", "max_ratio (%s) is below min_ratio (%s)", num.Exact(*p.MaxRatio), num.Exact(*p.MinRatio))
	}
	return p
}

// Scope: a relative check is judged once after every config, even against the baseline (it
// reads the stored engine report, not one launch's container).
func (p *RelativeParams) Scope() Scope { return ScopeCross }

// ConfigNames returns Config, then Of unless it is the baseline.
func (p *RelativeParams) ConfigNames() []string {
	if p.Of == OfBaseline {
		return []string{p.Config}
	}
	return []string{p.Config, p.Of}
}

func (p *RelativeParams) link(*linker, *Check)     {}
func (p *RelativeParams) validate(*linker, *Check) {}

func (p *RelativeParams) engineMetric() (string, *Error) { return p.Metric, p.metricAt }

// name: "relative custom-ar kv_cache_tokens >= 0.9 x nccl".
func (p *RelativeParams) name(CheckKind) string {
	var parts []string
	if p.MinRatio != nil {
		parts = append(parts, ">= "+num.Exact(*p.MinRatio)+" x "+p.Of)
	}
	if p.MaxRatio != nil {
		parts = append(parts, "<= "+num.Exact(*p.MaxRatio)+" x "+p.Of)
	}
	return fmt.Sprintf("relative %s %s %s", p.Config, p.Metric, strings.Join(parts, " and "))
}

// workloadFor: a relative check reads engine reports and runs no workload.
func (p *RelativeParams) workloadFor(string) string { return "" }
