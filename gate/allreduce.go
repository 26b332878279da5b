package gate

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/reckon-ci/reckon/wire"
)

// Tolerance bounds an allreduce algorithm's error against the float64 reference sum: relative to
// the magnitude of the sum (the probe's max_rel_err), and optionally in value units (the probe's
// max_abs_err; 0 leaves it unbounded).
type Tolerance struct {
	MaxRelErr float64 `json:"max_rel_err" yaml:"max_rel_err"`
	MaxAbsErr float64 `json:"max_abs_err,omitempty" yaml:"max_abs_err,omitempty"`
}

// unitRoundoff is u for each dtype reckon's probes use (2^-p with p significand bits).
var unitRoundoff = map[string]float64{
	"float32":  math.Ldexp(1, -24),
	"float16":  math.Ldexp(1, -11),
	"bfloat16": math.Ldexp(1, -8),
}

// DefaultAllReduceTolerances returns the per-dtype defaults for a world of worldSize ranks
// (docs/statistics.md, "Op-level allreduce probe"; 8 when worldSize < 2): the rounding-error
// bound γ(n-1) = (n-1)u / (1-(n-1)u) of any summation order, relative to the sum of the addends'
// magnitudes (the probe's max_rel_err denominator, docs/allreduce-probe.md). A correct algorithm
// can never exceed it, so the check has no false alarms; a wrong peer or stale buffer errs by
// about 1/n, far above it. For 8 ranks: float32 4.2e-7, float16 3.4e-3, bfloat16 2.8e-2.
func DefaultAllReduceTolerances(worldSize int) map[string]Tolerance {
	n := worldSize
	if n < 2 {
		n = 8
	}
	out := make(map[string]Tolerance, len(unitRoundoff))
	for dt, u := range unitRoundoff {
		k := float64(n-1) * u
		// 1e-9 relative slack: the probe computes the ratio in float64.
		out[dt] = Tolerance{MaxRelErr: k / (1 - k) * (1 + 1e-9)}
	}
	return out
}

// AllReduceProbeCheck judges an op-level allreduce probe. A calibrated probe (schema
// reckon.allreduce-probe/v2) is judged by the calibrated rule with the default bounds
// (AllReduceProbeCheckCalibrated); an older, uncalibrated one (v1) by the fixed rule below, and its
// message says so. The fixed rule: every algorithm that ran must be within
// its dtype's tolerance on random inputs, leave every rank with the same result (when the probe
// checked that), and be bit-exact on integer inputs (sums of small integers are exact in every
// dtype, so any error there is a bug, not rounding). Tolerances not given for a dtype default to
// DefaultAllReduceTolerances(p.WorldSize); an unknown dtype with no tolerance is an error. The
// message names the worst case.
func AllReduceProbeCheck(p *wire.AllReduceProbe, tol map[string]Tolerance) Verdict {
	return AllReduceProbeCheckOf(p, tol, nil)
}

// AllReduceProbeCheckOf is AllReduceProbeCheck judging only the named algorithms (every one the
// probe ran when algorithms is empty; for a calibrated probe, the named candidates). A named
// algorithm the probe never ran is an error: the check would otherwise pass without judging it.
func AllReduceProbeCheckOf(p *wire.AllReduceProbe, tol map[string]Tolerance, algorithms []string) Verdict {
	if p != nil && p.Schema == wire.AllReduceProbeSchema {
		return AllReduceProbeCheckCalibrated(p, tol, algorithms, DefaultAllReduceCalibration())
	}
	v := allReduceProbeFixed(p, tol, algorithms)
	if p != nil && (v.Outcome == Pass || v.Outcome == Fail) {
		v.Message += fmt.Sprintf(" [uncalibrated: %s has no oracle or controls, so it was judged by the fixed per-dtype rounding bounds; rerun the probe for a %s file]", nameOr(p.Schema, wire.AllReduceProbeSchemaV1), wire.AllReduceProbeSchema)
		v.Metrics["calibrated"] = 0
	}
	return v
}

// allReduceProbeFixed is the fixed (uncalibrated) rule of AllReduceProbeCheck.
func allReduceProbeFixed(p *wire.AllReduceProbe, tol map[string]Tolerance, algorithms []string) Verdict {
	v := Verdict{Name: "allreduce probe", Metrics: map[string]float64{}}
	if p == nil {
		v.Outcome, v.Message = Error, "allreduce probe: no probe result"
		return v
	}
	if p.Source != "" {
		v.Config = p.Source
		v.Name = "allreduce probe " + p.Source
	}
	if p.Schema != "" && p.Schema != wire.AllReduceProbeSchemaV1 && p.Schema != wire.AllReduceProbeSchema {
		v.Outcome = Error
		v.Message = fmt.Sprintf("%s: schema %q; expected %q (calibrated) or %q", v.Name, p.Schema, wire.AllReduceProbeSchema, wire.AllReduceProbeSchemaV1)
		return v
	}
	if len(p.Results) == 0 {
		v.Outcome, v.Message = Error, v.Name+": the probe has no results"
		return v
	}
	defaults := DefaultAllReduceTolerances(p.WorldSize)
	only, msg := onlyAlgorithms(p, algorithms)
	if msg != "" {
		v.Outcome = Error
		v.Message = v.Name + ": " + msg
		return v
	}
	t := fixedTally{only: only, worstRatio: -1}
	for i, c := range p.Results {
		tl, ok := tol[c.DType]
		if !ok {
			tl, ok = defaults[c.DType]
		}
		if !ok {
			v.Outcome = Error
			v.Message = fmt.Sprintf("%s: results[%d] has dtype %q with no tolerance; expected float32, float16 or bfloat16, or a tolerance for it", v.Name, i, c.DType)
			return v
		}
		t.judgeCase(c, tl)
	}
	v.Metrics["cases"] = float64(len(p.Results))
	v.Metrics["algorithm_runs"] = float64(t.ran)
	v.Metrics["skipped"] = float64(t.skipped)
	if t.worstRatio >= 0 {
		v.Metrics["worst_err_over_tolerance"] = t.worstRatio
	}
	v.Details = strings.TrimRight(t.details.String(), "\n")
	if t.ran == 0 {
		v.Outcome, v.Category, v.Message = Error, CategoryUnverified, v.Name+": every algorithm was skipped; nothing was checked"
		return v
	}
	if len(t.fails) > 0 {
		bySeverity(t.fails)
		v.Outcome = Fail
		v.Message = fmt.Sprintf("%s: %s%s", v.Name, t.fails[0].text, moreSuffix(len(t.fails)))
		return v
	}
	v.Outcome = Pass
	v.Message = fmt.Sprintf("%s: %d algorithm runs within tolerance over %d cases", v.Name, t.ran, len(p.Results))
	if t.worstText != "" {
		v.Message += fmt.Sprintf("; worst %s (%.0f%% of its limit)", t.worstText, 100*t.worstRatio)
	}
	return v
}

// onlyAlgorithms returns the set of algorithms to judge (nil: every one) and, when algorithms
// names one the probe never ran, the message that says so.
func onlyAlgorithms(p *wire.AllReduceProbe, algorithms []string) (map[string]bool, string) {
	if len(algorithms) == 0 {
		return nil, ""
	}
	only := map[string]bool{}
	seen := map[string]bool{}
	for _, c := range p.Results {
		for _, a := range c.Algorithms {
			seen[a.Name] = true
		}
	}
	var absent []string
	for _, a := range algorithms {
		only[a] = true
		if !seen[a] {
			absent = append(absent, a)
		}
	}
	if len(absent) == 0 {
		return only, ""
	}
	ran := make([]string, 0, len(seen))
	for a := range seen {
		ran = append(ran, a)
	}
	sort.Strings(ran)
	return nil, fmt.Sprintf("algorithms names %s, which the probe did not run; it ran %s", strings.Join(absent, ", "), strings.Join(ran, ", "))
}

// fixedTally accumulates what the fixed rule finds over the cases of one probe. A finding's
// severity is how far over its bound it is (err/tol), or 1e300 for an exactness failure.
type fixedTally struct {
	only         map[string]bool // the algorithms judged; nil: all
	fails        []finding
	details      strings.Builder
	ran, skipped int
	worstRatio   float64
	worstText    string
}

// judgeCase judges every selected algorithm of case c against the rounding bound tl of its
// dtype; on integer inputs every algorithm must be exact and every pair identical.
func (t *fixedTally) judgeCase(c wire.AllReduceProbeCase, tl Tolerance) {
	where := fmt.Sprintf("%s %s inputs, %s (%d elements)", c.DType, nameOr(c.Inputs, "random"), fmtBytes(c.SizeBytes), c.Elements)
	integer := c.Inputs == "integer"
	for _, a := range c.Algorithms {
		if t.only != nil && !t.only[a.Name] {
			continue
		}
		if a.Skipped != "" {
			t.skipped++
			fmt.Fprintf(&t.details, "%s: %s skipped (%s)\n", where, a.Name, a.Skipped)
			continue
		}
		t.ran++
		t.judgeAlgorithm(a, where, tl, integer)
	}
	if integer {
		for _, pr := range c.Pairs {
			if !pr.Identical {
				t.fails = append(t.fails, finding{sev: 1e300, text: fmt.Sprintf("%s: %s and %s differ on integer inputs (max_abs_diff %.3g)", where, pr.A, pr.B, pr.MaxAbsDiff)})
			}
		}
	}
}

// judgeAlgorithm judges one algorithm that ran in a case: identical across ranks, within the
// absolute bound, and exact on integer inputs or else within the relative bound.
func (t *fixedTally) judgeAlgorithm(a wire.AllReduceProbeAlgorithm, where string, tl Tolerance, integer bool) {
	if a.RanksIdentical != nil && !*a.RanksIdentical {
		t.fails = append(t.fails, finding{sev: 1e300, text: fmt.Sprintf("%s: %s left the ranks holding different results", where, a.Name)})
	}
	ratio := a.MaxRelErr / tl.MaxRelErr
	fmt.Fprintf(&t.details, "%s: %s max_rel_err %.3g (limit %.3g), max_abs_err %.3g, exact %v\n", where, a.Name, a.MaxRelErr, tl.MaxRelErr, a.MaxAbsErr, a.Exact)
	if tl.MaxAbsErr > 0 {
		if r := a.MaxAbsErr / tl.MaxAbsErr; !(a.MaxAbsErr <= tl.MaxAbsErr) {
			t.fails = append(t.fails, finding{sev: r, text: fmt.Sprintf("%s: %s max_abs_err %.3g > %.3g", where, a.Name, a.MaxAbsErr, tl.MaxAbsErr)})
		}
	}
	if integer {
		if !a.Exact {
			t.fails = append(t.fails, finding{sev: 1e300, text: fmt.Sprintf("%s: %s is not exact on integer inputs (max_abs_err %.3g)", where, a.Name, a.MaxAbsErr)})
		}
		return
	}
	if ratio > t.worstRatio {
		t.worstRatio = ratio
		t.worstText = fmt.Sprintf("%s at %s: max_rel_err %.3g", a.Name, where, a.MaxRelErr)
	}
	if !(a.MaxRelErr <= tl.MaxRelErr) {
		t.fails = append(t.fails, finding{sev: ratio, text: fmt.Sprintf("%s: %s max_rel_err %.3g > %.3g", where, a.Name, a.MaxRelErr, tl.MaxRelErr)})
	}
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d B", n)
	}
}
