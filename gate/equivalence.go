package gate

import (
	"fmt"
	"math"
	"strings"

	"github.com/reckon-ci/reckon/wire"
)

// Defaults of the equivalence check: this is their one home (spec leaves unset values unset and
// the gate fills them here; docs/statistics.md derives and calibrates them).
const (
	// DefaultMaxRatio bounds the candidate's KL distance over the trusted configs' (twin, or
	// base against an oracle). Calibrated with `reckon calibrate numerics` (docs/statistics.md)
	// on the reference engine: correct algorithms reach at most 1.34 (tp 8, bf16) and a 1% bf16
	// allreduce error at least 2.15; 1.7 is their geometric midpoint.
	DefaultMaxRatio = 1.7
	// DefaultBitwiseTolerance is the near-bitwise budget on |Δ logprob| used when the trusted
	// configs agree to within it (tp 2, where every correct single-rounding sum is bit-identical,
	// or float32 where the algorithms coincide): the candidate must then agree to within it too.
	DefaultBitwiseTolerance = 1e-6
	// UncalibratedGain is the end-to-end gain assumed by the uncalibrated bound (see
	// UncalibratedBound): the KL distance a correct allreduce may reach per unit of its RMS
	// per-element rounding difference. Measured on the reference engine: at most 1.34 in
	// bfloat16 (activations re-rounded after every allreduce absorb part of the difference) and
	// 9.3 in float32 (tp 4); 16 keeps a margin of 1.7 over the largest.
	UncalibratedGain = 16.0
)

// UnitRoundoff returns u = 2^-p of a dtype ("bfloat16", "float16", "float32"; "" and unknown
// names get bfloat16's, the coarsest) and whether the name was known.
func UnitRoundoff(dtype string) (float64, bool) {
	switch normDType(dtype) {
	case "bfloat16":
		return 0x1p-8, true
	case "float16":
		return 0x1p-11, true
	case "float32":
		return 0x1p-24, true
	}
	return 0x1p-8, false
}

func normDType(d string) string {
	switch strings.TrimPrefix(strings.ToLower(d), "torch.") {
	case "bfloat16", "bf16":
		return "bfloat16"
	case "float16", "fp16", "half":
		return "float16"
	case "float32", "fp32", "float":
		return "float32"
	}
	return ""
}

// UncalibratedBound is the fallback bound on the KL distance between two configs when no twin or
// oracle calibrates it: UncalibratedGain x u x sqrt(2(tp-1)/3), where u is the dtype's unit
// roundoff. Two correct tp-rank allreduces round each element at most tp-1 times each; with
// rounding errors uniform in [-u, u] (variance u²/3) their RMS per-element difference is at
// most u·sqrt(2(tp-1)/3). At tp 1 there is no allreduce and the bound is 0 (bit-identical).
func UncalibratedBound(dtype string, tp int) float64 {
	u, _ := UnitRoundoff(dtype)
	if tp <= 1 {
		return 0
	}
	return UncalibratedGain * u * math.Sqrt(2*float64(tp-1)/3)
}

// EquivalenceCheck is what an equivalence check asks. Nil fields are unset and take the
// defaults above; an explicit 0 means 0.
type EquivalenceCheck struct {
	// TopK: at the first divergence of the free-running greedy outputs each side's token must
	// be among the other's top-k candidates (vLLM's check_logprobs_close rule); 0 means every
	// candidate the probe recorded.
	TopK int
	// MaxRatio (with a twin or oracle) bounds distance(candidate) / distance(trusted).
	MaxRatio *float64
	// BitwiseTolerance (with a twin or oracle) is the near-bitwise budget on |Δ logprob|.
	BitwiseTolerance *float64
	// MaxDistance (without twin and oracle) bounds the KL distance; default UncalibratedBound.
	MaxDistance *float64
	// MaxAbsLogprob and MeanAbsLogprob, when set, bound |Δ logprob| over the trimmed forced
	// tokens (reference p >= 1e-4) and the agreed prefixes of the greedy outputs; MinExactMatch,
	// when set, is the minimum fraction of prompts whose greedy outputs are identical.
	MaxAbsLogprob, MeanAbsLogprob, MinExactMatch *float64
	// DType and TP of the compared configs, for the uncalibrated bound ("" and 0: unknown, the
	// coarsest dtype is assumed and said).
	DType string
	TP    int
}

// EquivalenceProbes are the probe files an equivalence check compares: Base is the reference
// config, Head the candidate; Twin (a correct allreduce summing in another order) and Oracle (a
// higher-precision or fixed-order reference) are optional and calibrate the verdict.
type EquivalenceProbes struct {
	Base, Head, Twin, Oracle *wire.NumericsProbe
}

// Equivalence judges whether Head's numerics are equivalent to Base's.
//
// Every probe scores the same teacher-forced sequences; per position the next-token
// distributions are compared by KL divergence over the reference's top-k (tail below
// TailLogprob ignored) and summarised per pass (one request at a time; under load) as the KL
// distance √(2·mean KL). With a twin the candidate's distance from Base is divided by the twin's
// distance from Base; with an oracle each one's distance from the oracle is used, the
// denominator being the largest among the trusted configs (Base, and the twin if named). The
// ratio, with a 95% bootstrap interval over prompts, must not exceed MaxRatio in any pass. When
// the trusted configs agree with the reference point to within BitwiseTolerance everywhere, the
// candidate must too (near-bitwise rule). Without twin or oracle the distance is bounded by
// MaxDistance and the verdict says "uncalibrated". In every mode the free-running greedy outputs
// are compared up to their first divergence and a divergence outside the top-k fails.
func Equivalence(pr EquivalenceProbes, chk EquivalenceCheck) Verdict {
	v := Verdict{Name: "equivalence", Metrics: map[string]float64{}}
	base, head := pr.Base, pr.Head
	if base == nil || head == nil {
		v.Outcome, v.Category, v.Message = Error, CategoryMeasurement, "equivalence: a numerics probe is missing"
		return v
	}
	baseName, headName := nameOr(base.Config, "base"), nameOr(head.Config, "head")
	v.Config = headName + " vs " + baseName
	v.Against = base.Config
	v.Name = "equivalence " + v.Config
	all := []*wire.NumericsProbe{base, head}
	for _, p := range []*wire.NumericsProbe{pr.Twin, pr.Oracle} {
		if p != nil {
			all = append(all, p)
		}
	}
	if err := checkEquivalenceProbes(base, all); err != nil {
		v.Outcome, v.Category, v.Message = Error, CategoryUnverified, fmt.Sprintf("%s: %v", v.Config, err)
		return v
	}

	e := &equivJudge{v: &v, chk: chk, headName: headName}
	e.referencePoint(pr)
	passes := []string{passSequential}
	batchedNote := ""
	if allHave(all, passBatched) {
		passes = append(passes, passBatched)
	} else {
		batchedNote = "no under-load scores in every probe (numerics.batch_size 0, or an older probe file): judged one request at a time only"
	}
	var headVsBase *pairDist // head against base one at a time, when the passes compute it anyway
	for _, pass := range passes {
		cand := comparePair(e.ref, head, pass)
		if pass == passSequential && e.ref == base {
			headVsBase = &cand
		}
		e.judgePass(pass, cand)
	}
	if batchedNote != "" {
		fmt.Fprintf(&e.b, "%s\n", batchedNote)
	}

	// The free-running greedy outputs, up to the first divergence: a smoke test (garbage fails)
	// and the optional fixed bounds.
	g := compareGreedy(base, head, chk.TopK, baseName, headName)
	e.greedy(g, len(base.Prompts), baseName)
	// Optional fixed bounds over the trimmed forced tokens and the agreed greedy prefixes.
	if headVsBase == nil {
		d := comparePair(base, head, passSequential)
		headVsBase = &d
	}
	e.fixedBounds(g, headVsBase, len(base.Prompts))

	calib := e.calibration(pr)
	v.Details = strings.TrimRight(e.b.String(), "\n")
	if len(e.problems) > 0 {
		v.Outcome, v.Category = Fail, CategoryBrokenInvariant
		v.Message = fmt.Sprintf("%s: not equivalent (%s): %s", v.Config, calib, e.problems[0])
		if len(e.problems) > 1 {
			v.Details = "problems:\n- " + strings.Join(e.problems, "\n- ") + "\n" + v.Details
		}
		return v
	}
	v.Outcome = Pass
	v.Message = fmt.Sprintf("%s: equivalent (%s): %s; %d/%d greedy outputs identical", v.Config, calib, strings.Join(e.summary, ", "), g.exact, len(base.Prompts))
	return v
}

// checkEquivalenceProbes checks that every probe in all after the first (base) scored the same
// prompts and forced sequences as base, and that base's forced sequences are consistent.
func checkEquivalenceProbes(base *wire.NumericsProbe, all []*wire.NumericsProbe) error {
	for _, p := range all[1:] {
		if err := checkProbePair(base, p); err != nil {
			return err
		}
		if err := checkForcedPair(base, p); err != nil {
			return err
		}
	}
	return checkForcedPair(base, base)
}

// equivJudge carries an equivalence check through its passes: the verdict whose metrics it
// fills, the details text, the problems found and the summary of what held.
type equivJudge struct {
	v        *Verdict
	chk      EquivalenceCheck
	headName string
	ref      *wire.NumericsProbe   // the reference point: the oracle, else base
	trusted  []*wire.NumericsProbe // the configs trusted to be correct, compared with ref
	mode     string                // "uncalibrated", "twin" or "oracle"
	uncalSrc string                // where the uncalibrated bound came from
	b        strings.Builder
	problems []string
	summary  []string
}

// referencePoint picks the reference point, the trusted configs and the mode from which of
// twin and oracle the probes include.
func (e *equivJudge) referencePoint(pr EquivalenceProbes) {
	e.ref, e.mode = pr.Base, "uncalibrated"
	switch {
	case pr.Oracle != nil:
		e.ref, e.mode = pr.Oracle, "oracle"
		e.trusted = append(e.trusted, pr.Base)
		if pr.Twin != nil {
			e.trusted = append(e.trusted, pr.Twin)
		}
	case pr.Twin != nil:
		e.mode = "twin"
		e.trusted = append(e.trusted, pr.Twin)
	}
}

// judgePass records the candidate's distance from the reference point in one pass and judges it
// by the mode's rule.
func (e *equivJudge) judgePass(pass string, cand pairDist) {
	sfx := ""
	if pass == passBatched {
		sfx = "_batched"
	}
	dist := cand.distance(nil)
	e.v.Metrics["kl_distance"+sfx] = dist
	e.v.Metrics["rms_dp"+sfx] = cand.rmsDP(nil)
	e.v.Metrics["top1_agreement"+sfx] = cand.top1Agreement()
	mx, _, _ := cand.maxAbs()
	e.v.Metrics["max_abs_logprob_diff"+sfx] = mx
	e.describePass(pass, cand)
	if e.mode == "uncalibrated" {
		e.uncalibratedPass(pass, cand)
		return
	}
	e.calibratedPass(pass, sfx, cand)
}

// describePass writes the details lines of the candidate's scores in one pass.
func (e *equivJudge) describePass(pass string, cand pairDist) {
	mx, mxID, mxPos := cand.maxAbs()
	med, p99, tmax, nTrim := cand.absPercentiles()
	fmt.Fprintf(&e.b, "%s: %s vs %s over %d positions of %d prompts: KL distance %.4g, RMS Δp %.4g, top-1 agreement %.2f%%; trimmed |Δ logprob| (p >= 1e-4, %d tokens) median %.3g, p99 %.3g, max %.3g; max |Δ| of any recorded logprob %.3g (prompt %q position %d, %d positions differ)\n",
		pass, e.headName, cand.ref, cand.positions(), len(cand.prompts), cand.distance(nil), cand.rmsDP(nil), 100*cand.top1Agreement(), nTrim, med, p99, tmax, mx, mxID, mxPos, cand.differing())
	fmt.Fprintf(&e.b, "%s: %s\n", pass, cand.describeWorst())
}

// uncalibratedPass bounds the candidate's KL distance by max_distance, or by the bound from the
// dtype's unit roundoff and the TP degree.
func (e *equivJudge) uncalibratedPass(pass string, cand pairDist) {
	chk := e.chk
	dist := cand.distance(nil)
	bound := UncalibratedBound(chk.DType, chk.TP)
	src := fmt.Sprintf("bound from %s unit roundoff at tp %d", nameOr(normDType(chk.DType), "bfloat16"), chk.TP)
	if _, ok := UnitRoundoff(chk.DType); !ok {
		src = fmt.Sprintf("bound from bfloat16 unit roundoff (dtype unknown) at tp %d", chk.TP)
	}
	if chk.MaxDistance != nil {
		bound, src = *chk.MaxDistance, "max_distance"
	}
	e.uncalSrc = src
	e.v.Metrics["max_distance"] = bound
	if dist > bound {
		e.problems = append(e.problems, fmt.Sprintf("KL distance %.3g > %.3g (%s); %s", dist, bound, pass, cand.describeWorst()))
	}
	e.summary = append(e.summary, fmt.Sprintf("KL distance %.3g <= %.3g (%s)", dist, bound, pass))
}

// calibratedPass compares the trusted configs with the reference point in one pass and judges
// the candidate by the near-bitwise rule where they all agree with it, else by the ratio rule.
func (e *equivJudge) calibratedPass(pass, sfx string, cand pairDist) {
	tol := DefaultBitwiseTolerance
	if e.chk.BitwiseTolerance != nil {
		tol = *e.chk.BitwiseTolerance
	}
	var dens []pairDist
	bitwise := true
	var trustedNames []string
	for _, t := range e.trusted {
		d := comparePair(e.ref, t, pass)
		dens = append(dens, d)
		tm, _, _ := d.maxAbs()
		if tm > tol {
			bitwise = false
		}
		trustedNames = append(trustedNames, d.cand)
		e.v.Metrics["kl_distance_"+metricName(d.cand)+sfx] = d.distance(nil)
		fmt.Fprintf(&e.b, "%s: trusted %s vs %s: KL distance %.4g, RMS Δp %.4g, max |Δ| %.3g\n", pass, d.cand, d.ref, d.distance(nil), d.rmsDP(nil), tm)
	}
	who := strings.Join(trustedNames, " and ")
	if bitwise {
		e.nearBitwisePass(pass, who, tol, cand)
		return
	}
	e.ratioPass(pass, sfx, who, cand, dens)
}

// nearBitwisePass holds the candidate to within tol of the reference point everywhere, as the
// trusted configs (who) are.
func (e *equivJudge) nearBitwisePass(pass, who string, tol float64, cand pairDist) {
	mx, mxID, mxPos := cand.maxAbs()
	e.v.Metrics["bitwise_tolerance"] = tol
	fmt.Fprintf(&e.b, "%s: near-bitwise rule: %s agree with %s to within %g everywhere (expected at tp 2, and wherever the algorithms coincide; if the twin should sum in another order here, check that its setting, e.g. NCCL_ALGO, took effect)\n", pass, who, e.ref.Config, tol)
	if mx > tol {
		e.problems = append(e.problems, fmt.Sprintf("near-bitwise expected (%s within %g of %s everywhere; %s) but max |Δ logprob| %.3g at prompt %q position %d (%d of %d positions differ)",
			who, tol, e.ref.Config, pass, mx, mxID, mxPos, cand.differing(), cand.positions()))
	}
	e.summary = append(e.summary, fmt.Sprintf("near-bitwise (%s; max |Δ| %.3g <= %g)", pass, mx, tol))
}

// ratioPass bounds the candidate's KL distance as a multiple of the largest trusted config's
// (dens), with a bootstrap interval over prompts.
func (e *equivJudge) ratioPass(pass, sfx, who string, cand pairDist, dens []pairDist) {
	ratio, lo, hi := ratioCI(cand, dens)
	maxRatio := DefaultMaxRatio
	if e.chk.MaxRatio != nil {
		maxRatio = *e.chk.MaxRatio
	}
	e.v.Metrics["ratio"+sfx], e.v.Metrics["ratio_ci_low"+sfx], e.v.Metrics["ratio_ci_high"+sfx] = finite(ratio), finite(lo), finite(hi)
	e.v.Metrics["max_ratio"] = maxRatio
	rmsRatio := safeRatio(cand.rmsDP(nil), maxDen(dens, pairDist.rmsDP))
	e.v.Metrics["rms_dp_ratio"+sfx] = finite(rmsRatio)
	fmt.Fprintf(&e.b, "%s: KL distance ratio %.3g (95%% CI %.3g–%.3g, %d prompt resamples; max_ratio %g); RMS Δp ratio %.3g\n", pass, ratio, lo, hi, BootstrapResamples, maxRatio, rmsRatio)
	if ratio > maxRatio {
		e.problems = append(e.problems, fmt.Sprintf("KL distance %.3gx %s's (%s; 95%% CI %.3g–%.3g; max_ratio %g); %s", ratio, who, pass, lo, hi, maxRatio, cand.describeWorst()))
	}
	e.summary = append(e.summary, fmt.Sprintf("KL distance %.2fx %s's (%s; 95%% CI %.2f–%.2f)", ratio, who, pass, lo, hi))
}

// greedy records the comparison of the free-running greedy outputs over prompts prompts and
// fails a divergence outside the top-k.
func (e *equivJudge) greedy(g greedyResult, prompts int, baseName string) {
	e.v.Metrics["prompts"] = float64(prompts)
	e.v.Metrics["exact_match_fraction"] = g.exactFrac
	e.v.Metrics["divergences"] = float64(len(g.divs))
	e.v.Metrics["topk_violations"] = float64(len(g.bad))
	e.b.WriteString(g.details)
	if len(g.bad) > 0 {
		d := g.bad[0]
		e.problems = append(e.problems, fmt.Sprintf("greedy output of prompt %q diverges at position %d outside the top-%d: %s has %s (logprob %.4f), %s has %s (logprob %.4f); %s",
			d.prompt, d.pos, e.chk.TopK, baseName, tokText(d.base.Token, d.base.Text), d.base.Logprob, e.headName, tokText(d.head.Token, d.head.Text), d.head.Logprob, d.why))
	}
}

// fixedBounds applies the optional fixed bounds (max and mean |Δ logprob|, minimum exact-match
// fraction) over the trimmed forced tokens of headVsBase and the agreed greedy prefixes.
func (e *equivJudge) fixedBounds(g greedyResult, headVsBase *pairDist, prompts int) {
	chk := e.chk
	abs := append([]float64(nil), g.abs...)
	for _, p := range headVsBase.prompts {
		abs = append(abs, p.absLP...)
	}
	var mean, mx float64
	for _, x := range abs {
		mean += x
		mx = max(mx, x)
	}
	if len(abs) > 0 {
		mean /= float64(len(abs))
	}
	e.v.Metrics["mean_abs_logprob_diff"] = mean
	if chk.MaxAbsLogprob != nil && mx > *chk.MaxAbsLogprob {
		e.problems = append(e.problems, fmt.Sprintf("max |Δ logprob| %.4g > %.4g (max_abs_logprob_delta) over %d trimmed positions", mx, *chk.MaxAbsLogprob, len(abs)))
	}
	if chk.MeanAbsLogprob != nil && mean > *chk.MeanAbsLogprob {
		e.problems = append(e.problems, fmt.Sprintf("mean |Δ logprob| %.4g > %.4g (mean_abs_logprob_delta) over %d trimmed positions", mean, *chk.MeanAbsLogprob, len(abs)))
	}
	if chk.MinExactMatch != nil && g.exactFrac < *chk.MinExactMatch {
		e.problems = append(e.problems, fmt.Sprintf("%d of %d greedy outputs identical (%.0f%% < min_exact_match %.0f%%)", g.exact, prompts, 100*g.exactFrac, 100**chk.MinExactMatch))
	}
}

// calibration says how the verdict was calibrated: by twin, by oracle (and twin), or not at all
// and where the bound came from.
func (e *equivJudge) calibration(pr EquivalenceProbes) string {
	calib := "calibrated by twin " + nameOr(probeName(pr.Twin), "?")
	switch e.mode {
	case "oracle":
		calib = "calibrated by oracle " + pr.Oracle.Config
		if pr.Twin != nil {
			calib += " and twin " + pr.Twin.Config
		}
	case "uncalibrated":
		calib = "uncalibrated: no twin or oracle; " + e.uncalSrc
	}
	return calib
}

func probeName(p *wire.NumericsProbe) string {
	if p == nil {
		return ""
	}
	return p.Config
}

func allHave(ps []*wire.NumericsProbe, pass string) bool {
	for _, p := range ps {
		if !hasPass(p, pass) {
			return false
		}
	}
	return true
}

func maxDen(ds []pairDist, f func(pairDist, []int) float64) float64 {
	m := 0.0
	for _, d := range ds {
		m = max(m, f(d, nil))
	}
	return m
}

// metricName makes a config name usable inside a metric key.
func metricName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}
