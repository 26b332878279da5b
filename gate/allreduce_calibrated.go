package gate

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/reckon-ci/reckon/wire"
)

// AllReduceCalibration holds the bounds of the calibrated op-level rule
// (docs/allreduce-probe.md, "The calibrated rule").
type AllReduceCalibration struct {
	// MaxNRMSERatio bounds a candidate's NRMSE against the oracle as a multiple of the best
	// correct algorithm's (the reference and the twins) in the same case. Reference: 1.5
	// (numerics-equivalence.md §9.1: NRMSE(cand, O) <= 1.5 x NRMSE(NCCL, O)); a correct
	// reordering scores about 0.86-1.1, a 1% bf16 error 2.5-3.5.
	MaxNRMSERatio float64 `json:"max_nrmse_ratio"`
	// FloorULP bounds a candidate's max ULP distance to the oracle where every correct algorithm
	// equals the oracle bit for bit (always so at 2 ranks: a + b has one rounding in any order):
	// the near-bitwise rule. Default 1.
	FloorULP float64 `json:"floor_ulp"`
}

// DefaultAllReduceCalibration returns the reference bounds: NRMSE ratio 1.5, 1 ULP floor.
func DefaultAllReduceCalibration() AllReduceCalibration {
	return AllReduceCalibration{MaxNRMSERatio: 1.5, FloorULP: 1}
}

// judgement is what the calibrated rule says about one algorithm in one case.
type judgement struct {
	decided bool    // false: nothing to compare with
	ok      bool    // passes
	floor   bool    // judged by the near-bitwise rule (the correct algorithms equal the oracle)
	ratio   float64 // NRMSE / best correct NRMSE (ratio mode only)
	reason  string  // why it fails, or what it scored
}

// AllReduceProbeCheckCalibrated judges a reckon.allreduce-probe/v2 probe by the calibrated rule:
//
//   - every candidate, in every case where it took its custom path, has an NRMSE against the
//     fixed-order oracle of at most cal.MaxNRMSERatio times the best correct algorithm's (the
//     reference and the twins); where those all equal the oracle bit for bit (2 ranks), it is
//     near-bitwise (max ULP <= cal.FloorULP); on integer inputs it is exact; it stays within the
//     fixed rounding bound tol of its dtype and leaves every rank with the same result;
//   - its custom path was actually taken: engaged_calls equals calls up to its max_bytes, and is
//     0 above it (where the engine hands the message to NCCL, the case is not the candidate's);
//   - the controls are present and behave: every negative control (the reference and each twin)
//     passes the same rule against the other correct algorithms, and every positive control (a
//     fault injected around a candidate) fails it in at least one case.
//
// A probe without twins or without positive controls is an error: the rule would not show that
// it separates correct from broken kernels. Negative controls that fail are an error too (the
// bound is inside the legitimate spread of this testbed: recalibrate), as are positive controls
// that pass everywhere (the rule cannot see that fault). algorithms selects the candidates judged
// (all when empty); naming one that is not a candidate of the probe is an error.
func AllReduceProbeCheckCalibrated(p *wire.AllReduceProbe, tol map[string]Tolerance, algorithms []string, cal AllReduceCalibration) Verdict {
	v := Verdict{Name: "allreduce probe", Kind: KindAllReduceProbe, Metrics: map[string]float64{}}
	if p == nil {
		v.Outcome, v.Message = Error, "allreduce probe: no probe result"
		return v
	}
	if p.Source != "" {
		v.Config = p.Source
		v.Name = "allreduce probe " + p.Source
	}
	errorf := func(format string, args ...any) Verdict {
		v.Outcome = Error
		v.Message = v.Name + ": " + fmt.Sprintf(format, args...)
		return v
	}
	if !(cal.MaxNRMSERatio >= 1) || math.IsInf(cal.MaxNRMSERatio, 0) || !(cal.FloorULP >= 0) || math.IsInf(cal.FloorULP, 0) {
		return errorf("calibration max_nrmse_ratio %g, floor_ulp %g: expected a ratio >= 1 and a ULP bound >= 0, both finite", cal.MaxNRMSERatio, cal.FloorULP)
	}
	if p.Calibration == nil || len(p.Calibration.Roles) == 0 {
		return errorf("the calibrated rule needs the probe's calibration (oracle and roles); this %s file has none", p.Schema)
	}
	if len(p.Results) == 0 {
		return errorf("the probe has no results")
	}
	roles := map[string]wire.AllReduceProbeRole{}
	var candidates, twins, positives []string
	for _, r := range p.Calibration.Roles {
		roles[r.Algorithm] = r
		switch r.Role {
		case wire.RoleCandidate:
			candidates = append(candidates, r.Algorithm)
		case wire.RoleTwin:
			twins = append(twins, r.Algorithm)
		case wire.RolePositiveControl:
			positives = append(positives, r.Algorithm)
		}
	}
	var missing []string
	if len(candidates) == 0 {
		missing = append(missing, "no candidate")
	}
	if len(twins) == 0 {
		missing = append(missing, "no negative controls (twins: a correct algorithm in another summation order, e.g. NCCL_ALGO=Tree)")
	}
	if len(positives) == 0 {
		missing = append(missing, "no positive controls (a fault injected around a candidate, e.g. its output x 1.01)")
	}
	if len(missing) > 0 {
		return errorf("the calibrated rule rejects this probe: %s; without both kinds of control it cannot show that it passes correct algorithms and fails broken ones (rerun the probe with its controls)", strings.Join(missing, "; "))
	}
	judged := map[string]bool{}
	if len(algorithms) > 0 {
		var absent []string
		for _, a := range algorithms {
			if roles[a].Role != wire.RoleCandidate {
				absent = append(absent, a)
			}
			judged[a] = true
		}
		if len(absent) > 0 {
			return errorf("algorithms names %s, which is not a candidate of the probe; its candidates are %s", strings.Join(absent, ", "), strings.Join(candidates, ", "))
		}
	} else {
		for _, c := range candidates {
			judged[c] = true
		}
	}
	defaults := DefaultAllReduceTolerances(p.WorldSize)

	type finding struct {
		sev  float64
		text string
	}
	var fails, negFails []finding
	var b strings.Builder
	candCases := map[string]int{}
	posFailed := map[string]int{}
	posFirst := map[string]string{}
	posCases := map[string]int{}
	posFaulted := map[string]int64{}
	ran := 0
	worstCand, worstCandText := -1.0, ""
	worstNeg := -1.0
	maxCandULPFloor := 0.0
	for i, c := range p.Results {
		where := fmt.Sprintf("%s %s inputs, %s (%d elements), %s x%d", c.DType, c.Inputs, fmtBytes(c.SizeBytes), c.Elements, nameOr(c.Mode, "eager"), c.Calls)
		t, ok := tol[c.DType]
		if !ok {
			t, ok = defaults[c.DType]
		}
		if !ok {
			return errorf("results[%d] has dtype %q with no tolerance; expected float32, float16 or bfloat16, or a tolerance for it", i, c.DType)
		}
		var correct []wire.AllReduceProbeAlgorithm
		for _, a := range c.Algorithms {
			if a.Skipped == "" {
				ran++
				if r := roles[a.Name].Role; r == wire.RoleReference || r == wire.RoleTwin {
					correct = append(correct, a)
				}
			}
		}
		judge := func(x wire.AllReduceProbeAlgorithm) judgement {
			return judgeCalibrated(x, correct, c, t, cal)
		}
		for _, a := range c.Algorithms {
			if a.Skipped != "" {
				fmt.Fprintf(&b, "%s: %s skipped (%s)\n", where, a.Name, a.Skipped)
				continue
			}
			role := roles[a.Name]
			switch role.Role {
			case wire.RoleReference, wire.RoleTwin:
				if c.Inputs == "order_sensitive" {
					// There the correct algorithms differ from the oracle by their summation
					// order, not their precision: that spread is what the input shows, not a
					// calibration to hold them to.
					continue
				}
				j := judge(a)
				if !j.decided {
					continue
				}
				fmt.Fprintf(&b, "%s: %s (%s, negative control) %s\n", where, a.Name, role.Role, j.reason)
				if !j.floor {
					worstNeg = max(worstNeg, j.ratio)
				}
				if !j.ok {
					negFails = append(negFails, finding{sev: j.ratio, text: fmt.Sprintf("negative control %s fails at %s: %s", a.Name, where, j.reason)})
				}
			case wire.RoleCandidate, wire.RolePositiveControl:
				base := role
				if role.Role == wire.RolePositiveControl {
					base = roles[role.Of]
				}
				engaged := int64(-1)
				if a.EngagedCalls != nil {
					engaged = *a.EngagedCalls
				}
				above := base.MaxBytes > 0 && c.SizeBytes > base.MaxBytes
				isCand := role.Role == wire.RoleCandidate
				if isCand && !judged[a.Name] {
					continue
				}
				switch {
				case engaged < 0:
					if isCand {
						fails = append(fails, finding{sev: 1e300, text: fmt.Sprintf("%s: %s has no engaged_calls: the probe cannot show its custom path was taken", where, a.Name)})
					}
					continue
				case above && engaged > 0:
					if isCand {
						fails = append(fails, finding{sev: 1e300, text: fmt.Sprintf("%s: %s took its custom path in %d calls of a message above its max_bytes %s", where, a.Name, engaged, fmtBytes(base.MaxBytes))})
					}
					continue
				case above:
					fmt.Fprintf(&b, "%s: %s not engaged above its max_bytes %s (NCCL carried it); not judged as the candidate\n", where, a.Name, fmtBytes(base.MaxBytes))
					continue
				case engaged < c.Calls:
					if isCand {
						fails = append(fails, finding{sev: 1e300, text: fmt.Sprintf("%s: %s took its custom path in only %d of %d calls (it fell back, so its numbers are another algorithm's)", where, a.Name, engaged, c.Calls)})
						continue
					}
				}
				j := judge(a)
				if !j.decided {
					fmt.Fprintf(&b, "%s: %s not judged: no correct algorithm ran in this case\n", where, a.Name)
					continue
				}
				if isCand {
					candCases[a.Name]++
					fmt.Fprintf(&b, "%s: %s %s\n", where, a.Name, j.reason)
					if j.floor {
						if a.MaxULP != nil {
							maxCandULPFloor = max(maxCandULPFloor, *a.MaxULP)
						}
					} else if j.ratio > worstCand {
						worstCand = j.ratio
						worstCandText = fmt.Sprintf("%s at %s", a.Name, where)
					}
					if !j.ok {
						sev := j.ratio
						if j.floor || math.IsInf(sev, 0) {
							sev = 1e299
						}
						fails = append(fails, finding{sev: sev, text: fmt.Sprintf("%s: %s %s", where, a.Name, j.reason)})
					}
					continue
				}
				posCases[a.Name]++
				if a.FaultedCalls != nil {
					posFaulted[a.Name] += *a.FaultedCalls
				}
				if !j.ok {
					if posFailed[a.Name] == 0 {
						posFirst[a.Name] = fmt.Sprintf("%s: %s", where, j.reason)
					}
					posFailed[a.Name]++
				}
			}
		}
	}
	// Candidates never judged: the custom path was never taken where it should have been.
	for _, c := range candidates {
		if judged[c] && candCases[c] == 0 {
			fails = append(fails, finding{sev: 1e300, text: fmt.Sprintf("%s was judged in no case (never engaged, skipped, or only above its max_bytes): the probe shows nothing about it", c)})
		}
	}
	var posBlind []string
	for _, pc := range positives {
		if posFailed[pc] > 0 {
			fmt.Fprintf(&b, "positive control %s (%s): fails in %d of %d cases, e.g. %s\n", pc, roles[pc].Fault, posFailed[pc], posCases[pc], posFirst[pc])
			continue
		}
		hint := ""
		if posFaulted[pc] == 0 {
			hint = "; its fault was never active (faulted_calls 0 everywhere: no size, mode or call reached it)"
		}
		posBlind = append(posBlind, fmt.Sprintf("positive control %s (%s) passes all %d cases it was judged in%s", pc, roles[pc].Fault, posCases[pc], hint))
	}
	v.Metrics["cases"] = float64(len(p.Results))
	v.Metrics["algorithm_runs"] = float64(ran)
	v.Metrics["max_nrmse_ratio"] = cal.MaxNRMSERatio
	v.Metrics["calibrated"] = 1
	v.Metrics["negative_controls"] = float64(len(twins) + 1)
	v.Metrics["positive_controls"] = float64(len(positives))
	v.Metrics["positive_controls_failing"] = float64(len(positives) - len(posBlind))
	if worstCand >= 0 {
		v.Metrics["candidate_worst_nrmse_ratio"] = worstCand
	}
	if worstNeg >= 0 {
		v.Metrics["negative_control_worst_nrmse_ratio"] = worstNeg
	}
	v.Metrics["candidate_max_ulp_where_bitwise"] = maxCandULPFloor
	v.Details = strings.TrimRight(b.String(), "\n")
	bySev := func(f []finding) {
		sort.SliceStable(f, func(i, j int) bool { return f[i].sev > f[j].sev })
	}
	more := func(n int) string {
		if n > 1 {
			return fmt.Sprintf(" (and %d more)", n-1)
		}
		return ""
	}
	switch {
	case len(negFails) > 0:
		bySev(negFails)
		v.Outcome = Error
		v.Message = fmt.Sprintf("%s: calibration does not hold: %s%s; the bound %gx is inside this testbed's legitimate spread (recalibrate, numerics-equivalence.md §9.2)", v.Name, negFails[0].text, more(len(negFails)), cal.MaxNRMSERatio)
	case len(fails) > 0:
		bySev(fails)
		v.Outcome = Fail
		v.Message = fmt.Sprintf("%s: %s%s", v.Name, fails[0].text, more(len(fails)))
		if len(posBlind) > 0 {
			v.Message += "; also " + posBlind[0]
		}
	case len(posBlind) > 0:
		v.Outcome = Error
		v.Message = fmt.Sprintf("%s: calibration does not hold: %s%s, so a pass would not show a broken kernel fails", v.Name, posBlind[0], more(len(posBlind)))
	default:
		v.Outcome = Pass
		var judgedNames []string
		for _, c := range candidates {
			if judged[c] {
				judgedNames = append(judgedNames, c)
			}
		}
		sort.Strings(judgedNames)
		v.Message = fmt.Sprintf("%s: calibrated rule holds over %d cases: %s within %gx of the best correct algorithm's NRMSE against the oracle",
			v.Name, len(p.Results), strings.Join(judgedNames, ", "), cal.MaxNRMSERatio)
		if worstCandText != "" {
			v.Message += fmt.Sprintf(" (worst %.3gx, %s)", worstCand, worstCandText)
		}
		v.Message += fmt.Sprintf(", near-bitwise where the correct algorithms equal it (max %g ULP), exact on integer inputs, custom path taken in every call; %d negative controls pass", maxCandULPFloor, len(twins)+1)
		if worstNeg >= 0 {
			v.Message += fmt.Sprintf(" (worst %.3gx)", worstNeg)
		}
		v.Message += fmt.Sprintf(", %d positive controls fail", len(positives))
	}
	return v
}

// judgeCalibrated applies the calibrated rule to algorithm x of case c: against the best of the
// other correct algorithms, near-bitwise where they all equal the oracle, exact on integers, within
// the fixed rounding bound t, identical across ranks.
func judgeCalibrated(x wire.AllReduceProbeAlgorithm, correct []wire.AllReduceProbeAlgorithm, c wire.AllReduceProbeCase, t Tolerance, cal AllReduceCalibration) judgement {
	nrmse, ulp := 0.0, 0.0
	if x.NRMSE != nil {
		nrmse = *x.NRMSE
	}
	if x.MaxULP != nil {
		ulp = *x.MaxULP
	}
	var other []string
	if x.RanksIdentical != nil && !*x.RanksIdentical {
		other = append(other, "left the ranks holding different results")
	}
	if !(x.MaxRelErr <= t.MaxRelErr) {
		other = append(other, fmt.Sprintf("max_rel_err %.3g above the rounding bound %.3g of any summation order", x.MaxRelErr, t.MaxRelErr))
	}
	if t.MaxAbsErr > 0 && !(x.MaxAbsErr <= t.MaxAbsErr) {
		other = append(other, fmt.Sprintf("max_abs_err %.3g > %.3g", x.MaxAbsErr, t.MaxAbsErr))
	}
	if c.Inputs == "integer" {
		j := judgement{decided: true, ok: x.Exact && len(other) == 0, floor: true}
		if !x.Exact {
			j.reason = fmt.Sprintf("is not exact on integer inputs (max_abs_err %.3g, max_ulp %g against the oracle)", x.MaxAbsErr, ulp)
		} else {
			j.reason = "exact on integer inputs"
		}
		if len(other) > 0 {
			j.reason += "; " + strings.Join(other, "; ")
		}
		return j
	}
	best, bestName := math.Inf(1), ""
	for _, a := range correct {
		if a.Name == x.Name || a.NRMSE == nil {
			continue
		}
		if *a.NRMSE < best {
			best, bestName = *a.NRMSE, a.Name
		}
	}
	if bestName == "" {
		return judgement{}
	}
	j := judgement{decided: true}
	if best == 0 {
		j.floor = true
		j.ok = ulp <= cal.FloorULP
		if j.ok {
			j.reason = fmt.Sprintf("max_ulp %g against the oracle, which the correct algorithms equal bitwise (near-bitwise rule, at most %g)", ulp, cal.FloorULP)
		} else {
			j.reason = fmt.Sprintf("max_ulp %g against the oracle, where the correct algorithms (%s) equal it bitwise (near-bitwise rule: at most %g; NRMSE %.3g)", ulp, bestName, cal.FloorULP, nrmse)
		}
	} else {
		j.ratio = nrmse / best
		j.ok = j.ratio <= cal.MaxNRMSERatio
		cmp := "<="
		if !j.ok {
			cmp = ">"
		}
		j.reason = fmt.Sprintf("NRMSE %.3g = %.3gx the best correct algorithm's (%s, %.3g) %s %gx", nrmse, j.ratio, bestName, best, cmp, cal.MaxNRMSERatio)
	}
	if len(other) > 0 {
		j.ok = false
		j.reason += "; " + strings.Join(other, "; ")
	}
	return j
}
