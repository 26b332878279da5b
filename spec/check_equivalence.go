package spec

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/reckon-ci/reckon/internal/num"
)

// EquivalenceParams are the fields of an equivalence check: the numerics probe outputs of Head
// against Base, calibrated by a Twin or an Oracle (a twin is derived when neither is written,
// unless `twin: none`).
type EquivalenceParams struct {
	// MaxRatio (with twin or oracle) bounds the candidate's distance over the trusted configs'
	// (nil: the gate's default).
	MaxRatio *float64 `json:"max_ratio,omitempty"`
	// Base and Head are the reference config and the candidate.
	Base string `json:"base,omitempty"`
	Head string `json:"head,omitempty"`
	// TopK: at the first divergence of the free-running greedy outputs each side's token must
	// be in the other's top-k (default: numerics.top_logprobs, filled when the spec is linked).
	TopK int `json:"top_k,omitempty"`
	// Twin is a trusted config whose allreduce is correct but sums in another order (on GPUs
	// NCCL with NCCL_ALGO=Tree against the Ring reference); its distance from Base calibrates
	// the verdict.
	Twin string `json:"twin,omitempty"`
	// Oracle is a higher-precision or fixed-order reference config; with it every distance is
	// measured from the oracle.
	Oracle string `json:"oracle,omitempty"`
	// TwinDerived: Twin was not written; reckon derived it from Base (see DeriveTwin) and
	// launches it once per base, so that the check is calibrated by default.
	TwinDerived bool `json:"twin_derived,omitempty"`
	// NoTwin: `twin: none` was written: no twin is derived and the check is judged against the
	// uncalibrated bound (max_distance), said so in every report.
	NoTwin bool `json:"no_twin,omitempty"`
	// BitwiseTolerance (with twin or oracle) is the near-bitwise budget on |Δ logprob| when the
	// trusted configs agree to within it. Nil: the gate's default.
	BitwiseTolerance *float64 `json:"bitwise_tolerance,omitempty"`
	// MaxDistance (without twin and oracle) is the uncalibrated bound on the KL distance. Nil:
	// derived from the dtype's unit roundoff and the tp size.
	MaxDistance *float64 `json:"max_distance,omitempty"`
	// MaxAbsLogprobDelta, MeanAbsLogprobDelta and MinExactMatch are optional fixed bounds,
	// applied only when written: |Δ logprob| over the trimmed teacher-forced tokens and the
	// agreed greedy prefixes, and the fraction of prompts with identical greedy outputs.
	MaxAbsLogprobDelta  *float64 `json:"max_abs_logprob_delta,omitempty"`
	MeanAbsLogprobDelta *float64 `json:"mean_abs_logprob_delta,omitempty"`
	MinExactMatch       *float64 `json:"min_exact_match,omitempty"`
}

func decodeEquivalence(b *builder, m *mapping, s *Spec) Params {
	p := &EquivalenceParams{}
	p.Base = b.refStr(m, "base", "config", true)
	p.Head = b.refStr(m, "head", "config", true)
	if p.Base != "" && p.Base == p.Head {
		v, _ := m.get("head")
		m.badc(CodeConflict, v, "head", "a config compared with itself (%q) always passes; name another config", p.Head)
	}
	p.TopK, _ = m.integer("top_k", 1)
	if v, ok := m.get("twin"); ok {
		if sn, isStr := v.(*ast.StringNode); isStr && sn.Value == twinNone {
			p.NoTwin = true
		}
	}
	if !p.NoTwin {
		p.Twin = b.refStr(m, "twin", "config", false)
	}
	p.Oracle = b.refStr(m, "oracle", "config", false)
	for _, k := range []struct{ key, name string }{{"twin", p.Twin}, {"oracle", p.Oracle}} {
		if k.name != "" && (k.name == p.Base || k.name == p.Head) {
			v, _ := m.get(k.key)
			m.badc(CodeConflict, v, k.key, "%s %q is also the check's base or head; it must be a third config", k.key, k.name)
		}
	}
	if p.Twin != "" && p.Twin == p.Oracle {
		v, _ := m.get("oracle")
		m.badc(CodeConflict, v, "oracle", "twin and oracle are the same config %q; name one of them", p.Oracle)
	}
	if p.NoTwin && p.Oracle != "" {
		v, _ := m.get("twin")
		m.badc(CodeConflict, v, "twin", "twin: none asks for the uncalibrated bound, but an oracle is named; leave one of them out")
	}
	p.decodeBounds(m)
	if s.Numerics == nil {
		b.errorc(CodeMissingField, m.node, m.path, "an equivalence check needs a numerics section (the prompts the probe sends)")
	}
	if p.TopK > 0 && s.Numerics != nil && p.TopK > s.Numerics.TopLogprobs {
		v, _ := m.get("top_k")
		m.bad(v, "top_k", "top_k %d is above numerics.top_logprobs (%d): the probe records too few alternatives", p.TopK, s.Numerics.TopLogprobs)
	}
	return p
}

// decodeBounds reads the calibrated bounds (max_ratio, bitwise_tolerance), the uncalibrated one
// (max_distance) and the optional fixed bounds, each allowed only where it can apply.
func (p *EquivalenceParams) decodeBounds(m *mapping) {
	// Without twin or oracle reckon derives a twin (link), so only `twin: none` is uncalibrated.
	calibrated := !p.NoTwin
	p.MaxRatio = m.numberIn("max_ratio", 0, math.MaxFloat64, "a ratio > 0")
	p.BitwiseTolerance = m.numberIn("bitwise_tolerance", 0, math.MaxFloat64, "a tolerance >= 0")
	p.MaxDistance = m.numberIn("max_distance", 0, math.MaxFloat64, "a distance >= 0")
	if p.MaxRatio != nil && *p.MaxRatio == 0 {
		v, _ := m.get("max_ratio")
		m.bad(v, "max_ratio", "0 fails every candidate that differs at all; for an exact comparison set bitwise_tolerance: 0")
	}
	for _, key := range []string{"max_ratio", "bitwise_tolerance"} {
		if v, ok := m.get(key); ok && !calibrated {
			m.badc(CodeConflict, v, key, "%s needs a twin or an oracle to calibrate against (with twin: none the bound is max_distance)", key)
		}
	}
	if v, ok := m.get("max_distance"); ok && calibrated {
		m.badc(CodeConflict, v, "max_distance", "max_distance is the uncalibrated bound of `twin: none`; with a twin or oracle (derived when neither is written) the bound is max_ratio")
	}
	p.MaxAbsLogprobDelta = m.numberIn("max_abs_logprob_delta", 0, math.MaxFloat64, "a tolerance >= 0")
	p.MeanAbsLogprobDelta = m.numberIn("mean_abs_logprob_delta", 0, math.MaxFloat64, "a tolerance >= 0")
	p.MinExactMatch = m.numberIn("min_exact_match", 0, 1, "a fraction in [0, 1]")
	if p.MeanAbsLogprobDelta != nil && p.MaxAbsLogprobDelta != nil && *p.MeanAbsLogprobDelta > *p.MaxAbsLogprobDelta {
		v, _ := m.get("mean_abs_logprob_delta")
		m.d.errorc(CodeConflict, v, m.field("mean_abs_logprob_delta"), "mean tolerance (%s) above the max tolerance (%s) can never matter", num.Exact(*p.MeanAbsLogprobDelta), num.Exact(*p.MaxAbsLogprobDelta))
	}
}

// Scope: an equivalence check compares configs, so it is judged once after every config.
func (p *EquivalenceParams) Scope() Scope { return ScopeCross }

// ConfigNames returns Base, Head, then Twin and Oracle when set.
func (p *EquivalenceParams) ConfigNames() []string {
	out := []string{p.Base, p.Head}
	for _, n := range []string{p.Twin, p.Oracle} {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// Involves reports whether name is the check's base, head, twin or oracle (a config whose
// numerics must be probed).
func (p *EquivalenceParams) Involves(name string) bool {
	return p.Base == name || p.Head == name || p.Twin == name || p.Oracle == name
}

// link: top_k defaults to numerics.top_logprobs; a written twin must not launch like the base.
func (p *EquivalenceParams) link(l *linker, c *Check) {
	if l.s.Numerics != nil && p.TopK == 0 {
		p.TopK = l.s.Numerics.TopLogprobs
	}
	l.checkTwin(p)
}

func (p *EquivalenceParams) validate(*linker, *Check) {}

// name: "equivalence custom-ar vs nccl".
func (p *EquivalenceParams) name(CheckKind) string {
	return fmt.Sprintf("equivalence %s vs %s", p.Head, p.Base)
}

// checkTwin rejects a twin that launches exactly like the base: NCCL is run-to-run deterministic,
// so an identical rerun measures a distance of 0 and calibrates nothing (use another summation
// order, e.g. NCCL_ALGO=Tree).
func (l *linker) checkTwin(p *EquivalenceParams) {
	if p.Twin == "" || !l.configs[p.Twin] || !l.configs[p.Base] {
		return
	}
	tl, err1 := l.s.Resolved(p.Twin)
	bl, err2 := l.s.Resolved(p.Base)
	if err1 != nil || err2 != nil {
		return
	}
	tl.Config, bl.Config, tl.Tags, bl.Tags, tl.Expect, bl.Expect = "", "", nil, nil, Expect{}, Expect{}
	tj, _ := json.Marshal(tl)
	bj, _ := json.Marshal(bl)
	if string(tj) == string(bj) {
		for _, r := range l.refs {
			if r.name == p.Twin && strings.HasSuffix(r.field, ".twin") {
				l.errorc(CodeConflict, r.node, r.field, "twin %q launches exactly like base %q: a rerun of the same allreduce is bit-identical and calibrates nothing; give the twin another summation order (e.g. env NCCL_ALGO: Tree)", p.Twin, p.Base)
				return
			}
		}
	}
}

// workloadFor: an equivalence check needs numerics probes (Spec.NeedsNumerics), no workload.
func (p *EquivalenceParams) workloadFor(string) string { return "" }
