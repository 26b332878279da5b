package spec

import (
	"fmt"
	"strings"

	"github.com/reckon-ci/reckon/internal/metric"
	"github.com/reckon-ci/reckon/internal/num"
)

// CheckKind is the kind of a check.
type CheckKind string

// Check kinds. See docs/spec.md for each kind's fields.
const (
	// KindFloor bounds an EngineReport metric of each of Configs: Min <= value <= Max.
	KindFloor CheckKind = "floor"
	// KindRelative bounds an EngineReport metric of Config relative to the same metric of Of:
	// MinRatio <= value(Config)/value(Of) <= MaxRatio.
	KindRelative CheckKind = "relative"
	// KindExpect requires what Configs' engines actually did (Expect), e.g. the effective
	// allreduce backend. One is implied by every configs[].expect.
	KindExpect CheckKind = "expect"
	// KindEquivalence compares the numerics probe outputs of Base and Head.
	KindEquivalence CheckKind = "equivalence"
	// KindAllReduceProbe judges an op-level allreduce probe JSON file (wire.AllReduceProbe).
	KindAllReduceProbe CheckKind = "allreduce_probe"
	// KindThroughput is a statistical verdict on a result metric of Config under Workload,
	// against the stored baseline or another config of the same run.
	KindThroughput CheckKind = "throughput"
	// KindLatency is KindThroughput under another name, for latency metrics (the metric, not the
	// kind, says which direction is better).
	KindLatency CheckKind = "latency"
)

// CheckKinds lists the kinds in the order docs/spec.md describes them.
var CheckKinds = []CheckKind{KindFloor, KindRelative, KindExpect, KindEquivalence, KindAllReduceProbe, KindThroughput, KindLatency}

// Against values of a statistical check.
const (
	AgainstBaseline = "baseline"
	AgainstConfig   = "config"
	// AgainstHistory judges against the runs stored in the results history since the series'
	// last change point on this testbed (reckon gate --history; docs/history.md).
	AgainstHistory = "history"
)

// DefaultHistoryRuns is the fewest runs since the last change point that `against: history`
// needs (Check.HistoryRuns).
const DefaultHistoryRuns = 5

// Check is one verdict. Which fields are set depends on Kind (see each field's comment).
type Check struct {
	Kind CheckKind `json:"kind"`
	// Name is unique within the spec: the name given, or one generated from the fields (stable
	// while the fields do not change), e.g. "floor kv_cache_tokens >= 10000".
	Name string `json:"name"`
	// Tags are extra Ginkgo labels for this check.
	Tags []string `json:"tags,omitempty"`
	// Implicit is true for expect checks generated from configs[].expect.
	Implicit bool `json:"implicit,omitempty"`
	// Line is the check's line in the spec file (the config's line for implicit checks).
	Line int `json:"line"`
	// metricAt is where the metric field was written (floor, relative), for errors found after
	// loading (see UnreportedMetrics).
	metricAt *Error

	// Configs (floor, expect): the configs the check applies to, in spec order; a floor without
	// configs applies to every config.
	Configs []string `json:"configs,omitempty"`
	// Metric (floor, relative): an EngineReport metric (see EngineMetrics), or (floor, with
	// Workload) a metric of reckon's workload (IsWorkloadMetric). (throughput, latency): a result
	// metric (see IsResultMetric). All are names of the metric registry (internal/metric).
	Metric string `json:"metric,omitempty"`
	// Min and Max (floor): inclusive bounds; at least one is set.
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`

	// Config (relative, throughput, latency): the config being judged.
	Config string `json:"config,omitempty"`
	// Of (relative): the config it is compared with, or OfBaseline: the same config's engine
	// report stored in this testbed's baseline.
	Of string `json:"of,omitempty"`
	// MinRatio and MaxRatio (relative): inclusive bounds on value(Config)/value(Of); at least one
	// is set. MaxRatio (equivalence, with twin or oracle): the bound on the candidate's distance
	// over the trusted configs' (nil: the gate's default).
	MinRatio *float64 `json:"min_ratio,omitempty"`
	MaxRatio *float64 `json:"max_ratio,omitempty"`

	// Expect (expect): what the engine must have done.
	Expect Expect `json:"expect,omitzero"`

	// Base and Head (equivalence): the reference config and the candidate.
	Base string `json:"base,omitempty"`
	Head string `json:"head,omitempty"`
	// TopK (equivalence): at the first divergence of the free-running greedy outputs each side's
	// token must be in the other's top-k (default: numerics.top_logprobs).
	TopK int `json:"top_k,omitempty"`
	// Twin (equivalence): a trusted config whose allreduce is correct but sums in another order
	// (on GPUs NCCL with NCCL_ALGO=Tree against the Ring reference); its distance from Base
	// calibrates the verdict.
	Twin string `json:"twin,omitempty"`
	// Oracle (equivalence): a higher-precision or fixed-order reference config; with it every
	// distance is measured from the oracle.
	Oracle string `json:"oracle,omitempty"`
	// TwinDerived (equivalence): Twin was not written; reckon derived it from Base (see
	// DeriveTwin) and launches it once per base, so that the check is calibrated by default.
	TwinDerived bool `json:"twin_derived,omitempty"`
	// NoTwin (equivalence): `twin: none` was written: no twin is derived and the check is
	// judged against the uncalibrated bound (max_distance), said so in every report.
	NoTwin bool `json:"no_twin,omitempty"`
	// BitwiseTolerance (equivalence, with twin or oracle): the near-bitwise budget on |Δ logprob|
	// when the trusted configs agree to within it. Nil: the gate's default.
	BitwiseTolerance *float64 `json:"bitwise_tolerance,omitempty"`
	// MaxDistance (equivalence, without twin and oracle): the uncalibrated bound on the KL
	// distance. Nil: derived from the dtype's unit roundoff and the tp size.
	MaxDistance *float64 `json:"max_distance,omitempty"`
	// MaxAbsLogprobDelta, MeanAbsLogprobDelta and MinExactMatch (equivalence): optional fixed
	// bounds, applied only when written: |Δ logprob| over the trimmed teacher-forced tokens and
	// the agreed greedy prefixes, and the fraction of prompts with identical greedy outputs.
	MaxAbsLogprobDelta  *float64 `json:"max_abs_logprob_delta,omitempty"`
	MeanAbsLogprobDelta *float64 `json:"mean_abs_logprob_delta,omitempty"`
	MinExactMatch       *float64 `json:"min_exact_match,omitempty"`

	// File (allreduce_probe): the probe JSON file.
	File string `json:"file,omitempty"`
	// Algorithms (allreduce_probe): the algorithms judged; empty means all but the reference.
	Algorithms []string `json:"algorithms,omitempty"`
	// MaxAbsErr and MaxRelErr (allreduce_probe): per-dtype tolerances against the reference,
	// keyed "float32", "bfloat16", "float16"; dtypes not listed use the gate's defaults. Integer
	// inputs must always be exact.
	MaxAbsErr map[string]float64 `json:"max_abs_err,omitempty"`
	MaxRelErr map[string]float64 `json:"max_rel_err,omitempty"`

	// Workload (throughput, latency): the workload whose trials are compared. (floor on a result
	// metric): the workload whose trials' median is bounded.
	Workload string `json:"workload,omitempty"`
	// Against (throughput, latency): AgainstBaseline or AgainstConfig.
	Against string `json:"against,omitempty"`
	// AgainstConfig: the other config when Against is AgainstConfig.
	AgainstConfig string `json:"against_config,omitempty"`
	// HistoryRuns (against: history): the fewest runs since the series' last change point the
	// window must hold (history_runs, default DefaultHistoryRuns); fewer is no_baseline.
	HistoryRuns int `json:"history_runs,omitempty"`
	// MinEffect (throughput, latency): the smallest relative change that counts (0.05 = 5%).
	MinEffect float64 `json:"min_effect,omitempty"`
	// Alpha (throughput, latency): the family-wise significance level (Holm-Bonferroni over the
	// run's statistical checks).
	Alpha float64 `json:"alpha,omitempty"`
}

// OfBaseline as a relative check's Of compares the config's engine report with the one stored in
// this testbed's baseline for the same config.
const OfBaseline = "baseline"

// IsResultFloor reports whether the check is a floor on a result metric (the median over a
// config's trials of Workload) rather than on an engine report value.
func (c *Check) IsResultFloor() bool { return c.Kind == KindFloor && c.Workload != "" }

// Defaults of optional check fields.
const (
	DefaultMinEffect = 0.02
	DefaultAlpha     = 0.01
)

// IsStatistical reports whether the check is a statistical verdict (throughput or latency).
func (c *Check) IsStatistical() bool { return c.Kind == KindThroughput || c.Kind == KindLatency }

// ConfigNames returns the configs the check involves, without duplicates, in the order the
// check names them (for floors and expects, the order of Configs).
func (c *Check) ConfigNames() []string {
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		for _, o := range out {
			if o == s {
				return
			}
		}
		out = append(out, s)
	}
	switch c.Kind {
	case KindFloor, KindExpect:
		for _, n := range c.Configs {
			add(n)
		}
	case KindRelative:
		add(c.Config)
		if c.Of != OfBaseline {
			add(c.Of)
		}
	case KindEquivalence:
		add(c.Base)
		add(c.Head)
		add(c.Twin)
		add(c.Oracle)
	case KindThroughput, KindLatency:
		add(c.Config)
		add(c.AgainstConfig)
	}
	return out
}

// IsCrossConfig reports whether the check compares two configs of the same run (so it can run
// only after both have been launched): relative, equivalence, and statistical checks against
// another config. A floor or expect over several configs judges each one alone.
func (c *Check) IsCrossConfig() bool {
	switch c.Kind {
	case KindRelative:
		return c.Of != OfBaseline
	case KindEquivalence:
		return true
	case KindThroughput, KindLatency:
		return c.Against == AgainstConfig
	}
	return false
}

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

// generatedName builds a check's stable default name from its fields.
func (c *Check) generatedName() string {
	switch c.Kind {
	case KindFloor:
		s := "floor "
		switch {
		case c.Min != nil && c.Max != nil:
			s += fmt.Sprintf("%s <= %s <= %s", num.Exact(*c.Min), c.Metric, num.Exact(*c.Max))
		case c.Min != nil:
			s += fmt.Sprintf("%s >= %s", c.Metric, num.Exact(*c.Min))
		case c.Max != nil:
			s += fmt.Sprintf("%s <= %s", c.Metric, num.Exact(*c.Max))
		default:
			s += c.Metric
		}
		if c.Workload != "" {
			s += " (" + c.Workload + ")"
		}
		return s
	case KindRelative:
		var parts []string
		if c.MinRatio != nil {
			parts = append(parts, ">= "+num.Exact(*c.MinRatio)+" x "+c.Of)
		}
		if c.MaxRatio != nil {
			parts = append(parts, "<= "+num.Exact(*c.MaxRatio)+" x "+c.Of)
		}
		return fmt.Sprintf("relative %s %s %s", c.Config, c.Metric, strings.Join(parts, " and "))
	case KindExpect:
		return fmt.Sprintf("expect %s allreduce == %s", strings.Join(c.Configs, ","), c.Expect.AllReduce)
	case KindEquivalence:
		return fmt.Sprintf("equivalence %s vs %s", c.Head, c.Base)
	case KindAllReduceProbe:
		s := "allreduce_probe " + c.File
		if len(c.Algorithms) > 0 {
			s += " [" + strings.Join(c.Algorithms, ",") + "]"
		}
		return s
	case KindThroughput, KindLatency:
		vs := AgainstBaseline
		if c.Against == AgainstConfig {
			vs = c.AgainstConfig
		} else if c.Against == AgainstHistory {
			vs = AgainstHistory
		}
		return fmt.Sprintf("%s %s %s %s vs %s", c.Kind, c.Config, c.Workload, c.Metric, vs)
	}
	return string(c.Kind)
}
