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
	v := Verdict{Name: "allreduce probe", Metrics: map[string]float64{}}
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
	pr := splitProbeRoles(p.Calibration.Roles)
	if msg := pr.missingControls(); msg != "" {
		return errorf("%s", msg)
	}
	judged, msg := pr.judgedCandidates(algorithms)
	if msg != "" {
		return errorf("%s", msg)
	}
	t := newCalibratedTally(pr, judged, cal)
	defaults := DefaultAllReduceTolerances(p.WorldSize)
	for i, c := range p.Results {
		tl, ok := tol[c.DType]
		if !ok {
			tl, ok = defaults[c.DType]
		}
		if !ok {
			return errorf("results[%d] has dtype %q with no tolerance; expected float32, float16 or bfloat16, or a tolerance for it", i, c.DType)
		}
		t.judgeCase(c, tl)
	}
	t.unjudgedCandidates()
	posBlind := t.positiveControls()
	t.setMetrics(&v, len(p.Results), len(posBlind))
	v.Details = strings.TrimRight(t.details.String(), "\n")
	t.conclude(&v, len(p.Results), posBlind)
	return v
}

// probeRoles is a probe's calibration roles, indexed by algorithm and split by kind.
type probeRoles struct {
	byName                       map[string]wire.AllReduceProbeRole
	candidates, twins, positives []string
}

// splitProbeRoles indexes roles by algorithm and lists the candidates, the twins and the
// positive controls in the order the probe gives them.
func splitProbeRoles(roles []wire.AllReduceProbeRole) probeRoles {
	pr := probeRoles{byName: map[string]wire.AllReduceProbeRole{}}
	for _, r := range roles {
		pr.byName[r.Algorithm] = r
		switch r.Role {
		case wire.RoleCandidate:
			pr.candidates = append(pr.candidates, r.Algorithm)
		case wire.RoleTwin:
			pr.twins = append(pr.twins, r.Algorithm)
		case wire.RolePositiveControl:
			pr.positives = append(pr.positives, r.Algorithm)
		}
	}
	return pr
}

// missingControls says why the calibrated rule rejects a probe that lacks a candidate, negative
// controls or positive controls; "" when it has all three.
func (pr probeRoles) missingControls() string {
	var missing []string
	if len(pr.candidates) == 0 {
		missing = append(missing, "no candidate")
	}
	if len(pr.twins) == 0 {
		missing = append(missing, "no negative controls (twins: a correct algorithm in another summation order, e.g. NCCL_ALGO=Tree)")
	}
	if len(pr.positives) == 0 {
		missing = append(missing, "no positive controls (a fault injected around a candidate, e.g. its output x 1.01)")
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("the calibrated rule rejects this probe: %s; without both kinds of control it cannot show that it passes correct algorithms and fails broken ones (rerun the probe with its controls)", strings.Join(missing, "; "))
}

// judgedCandidates returns the set of candidates to judge: those algorithms names, or every
// candidate when it is empty. The message is non-empty when algorithms names a non-candidate.
func (pr probeRoles) judgedCandidates(algorithms []string) (map[string]bool, string) {
	judged := map[string]bool{}
	if len(algorithms) == 0 {
		for _, c := range pr.candidates {
			judged[c] = true
		}
		return judged, ""
	}
	var absent []string
	for _, a := range algorithms {
		if pr.byName[a].Role != wire.RoleCandidate {
			absent = append(absent, a)
		}
		judged[a] = true
	}
	if len(absent) > 0 {
		return nil, fmt.Sprintf("algorithms names %s, which is not a candidate of the probe; its candidates are %s", strings.Join(absent, ", "), strings.Join(pr.candidates, ", "))
	}
	return judged, ""
}

// finding is one failure the calibrated rule found, with the severity that orders it in the
// verdict's message (the most severe first).
type finding struct {
	sev  float64
	text string
}

// calibratedTally accumulates what the calibrated rule finds over the cases of one probe: the
// failures, the per-control counts, the worst ratios and the details text.
type calibratedTally struct {
	probeRoles
	judged          map[string]bool
	cal             AllReduceCalibration
	fails, negFails []finding
	details         strings.Builder
	candCases       map[string]int
	posFailed       map[string]int
	posFirst        map[string]string
	posCases        map[string]int
	posFaulted      map[string]int64
	ran             int
	worstCand       float64
	worstCandText   string
	worstNeg        float64
	maxCandULPFloor float64
}

// newCalibratedTally starts an empty tally for the given roles, judged candidates and bounds.
func newCalibratedTally(pr probeRoles, judged map[string]bool, cal AllReduceCalibration) *calibratedTally {
	return &calibratedTally{
		probeRoles: pr,
		judged:     judged,
		cal:        cal,
		candCases:  map[string]int{},
		posFailed:  map[string]int{},
		posFirst:   map[string]string{},
		posCases:   map[string]int{},
		posFaulted: map[string]int64{},
		worstCand:  -1,
		worstNeg:   -1,
	}
}

// judgeCase judges every algorithm that ran in case c, under the rounding bound tl of its dtype.
func (t *calibratedTally) judgeCase(c wire.AllReduceProbeCase, tl Tolerance) {
	where := fmt.Sprintf("%s %s inputs, %s (%d elements), %s x%d", c.DType, c.Inputs, fmtBytes(c.SizeBytes), c.Elements, nameOr(c.Mode, "eager"), c.Calls)
	var correct []wire.AllReduceProbeAlgorithm
	for _, a := range c.Algorithms {
		if a.Skipped == "" {
			t.ran++
			if r := t.byName[a.Name].Role; r == wire.RoleReference || r == wire.RoleTwin {
				correct = append(correct, a)
			}
		}
	}
	judge := func(x wire.AllReduceProbeAlgorithm) judgement {
		return judgeCalibrated(x, correct, c, tl, t.cal)
	}
	for _, a := range c.Algorithms {
		if a.Skipped != "" {
			fmt.Fprintf(&t.details, "%s: %s skipped (%s)\n", where, a.Name, a.Skipped)
			continue
		}
		role := t.byName[a.Name]
		switch role.Role {
		case wire.RoleReference, wire.RoleTwin:
			if c.Inputs == "order_sensitive" {
				// There the correct algorithms differ from the oracle by their summation
				// order, not their precision: that spread is what the input shows, not a
				// calibration to hold them to.
				continue
			}
			t.negativeControl(a, role, where, judge)
		case wire.RoleCandidate, wire.RolePositiveControl:
			t.customPath(a, role, c, where, judge)
		}
	}
}

// negativeControl records how a correct algorithm (the reference or a twin) fares against the
// other correct algorithms of its case.
func (t *calibratedTally) negativeControl(a wire.AllReduceProbeAlgorithm, role wire.AllReduceProbeRole, where string, judge func(wire.AllReduceProbeAlgorithm) judgement) {
	j := judge(a)
	if !j.decided {
		return
	}
	fmt.Fprintf(&t.details, "%s: %s (%s, negative control) %s\n", where, a.Name, role.Role, j.reason)
	if !j.floor {
		t.worstNeg = max(t.worstNeg, j.ratio)
	}
	if !j.ok {
		t.negFails = append(t.negFails, finding{sev: j.ratio, text: fmt.Sprintf("negative control %s fails at %s: %s", a.Name, where, j.reason)})
	}
}

// customPath judges a candidate or a positive control in case c: first whether its custom path
// was taken as its max_bytes says it should be, then its numbers.
func (t *calibratedTally) customPath(a wire.AllReduceProbeAlgorithm, role wire.AllReduceProbeRole, c wire.AllReduceProbeCase, where string, judge func(wire.AllReduceProbeAlgorithm) judgement) {
	base := role
	if role.Role == wire.RolePositiveControl {
		base = t.byName[role.Of]
	}
	engaged := int64(-1)
	if a.EngagedCalls != nil {
		engaged = *a.EngagedCalls
	}
	above := base.MaxBytes > 0 && c.SizeBytes > base.MaxBytes
	isCand := role.Role == wire.RoleCandidate
	if isCand && !t.judged[a.Name] {
		return
	}
	switch {
	case engaged < 0:
		if isCand {
			t.fails = append(t.fails, finding{sev: 1e300, text: fmt.Sprintf("%s: %s has no engaged_calls: the probe cannot show its custom path was taken", where, a.Name)})
		}
		return
	case above && engaged > 0:
		if isCand {
			t.fails = append(t.fails, finding{sev: 1e300, text: fmt.Sprintf("%s: %s took its custom path in %d calls of a message above its max_bytes %s", where, a.Name, engaged, fmtBytes(base.MaxBytes))})
		}
		return
	case above:
		fmt.Fprintf(&t.details, "%s: %s not engaged above its max_bytes %s (NCCL carried it); not judged as the candidate\n", where, a.Name, fmtBytes(base.MaxBytes))
		return
	case engaged < c.Calls:
		if isCand {
			t.fails = append(t.fails, finding{sev: 1e300, text: fmt.Sprintf("%s: %s took its custom path in only %d of %d calls (it fell back, so its numbers are another algorithm's)", where, a.Name, engaged, c.Calls)})
			return
		}
	}
	j := judge(a)
	if !j.decided {
		fmt.Fprintf(&t.details, "%s: %s not judged: no correct algorithm ran in this case\n", where, a.Name)
		return
	}
	if isCand {
		t.candidate(a, where, j)
		return
	}
	t.positiveCase(a, where, j)
}

// candidate records a candidate's judgement in one case: its ratio or ULP distance, and a
// failure when it does not pass.
func (t *calibratedTally) candidate(a wire.AllReduceProbeAlgorithm, where string, j judgement) {
	t.candCases[a.Name]++
	fmt.Fprintf(&t.details, "%s: %s %s\n", where, a.Name, j.reason)
	if j.floor {
		if a.MaxULP != nil {
			t.maxCandULPFloor = max(t.maxCandULPFloor, *a.MaxULP)
		}
	} else if j.ratio > t.worstCand {
		t.worstCand = j.ratio
		t.worstCandText = fmt.Sprintf("%s at %s", a.Name, where)
	}
	if !j.ok {
		sev := j.ratio
		if j.floor || math.IsInf(sev, 0) {
			sev = 1e299
		}
		t.fails = append(t.fails, finding{sev: sev, text: fmt.Sprintf("%s: %s %s", where, a.Name, j.reason)})
	}
}

// positiveCase records a positive control's judgement in one case: whether its fault was active
// and whether the rule failed it (the first failure is kept as the example).
func (t *calibratedTally) positiveCase(a wire.AllReduceProbeAlgorithm, where string, j judgement) {
	t.posCases[a.Name]++
	if a.FaultedCalls != nil {
		t.posFaulted[a.Name] += *a.FaultedCalls
	}
	if !j.ok {
		if t.posFailed[a.Name] == 0 {
			t.posFirst[a.Name] = fmt.Sprintf("%s: %s", where, j.reason)
		}
		t.posFailed[a.Name]++
	}
}

// unjudgedCandidates fails every judged candidate that was judged in no case: its custom path was
// never taken where it should have been.
func (t *calibratedTally) unjudgedCandidates() {
	for _, c := range t.candidates {
		if t.judged[c] && t.candCases[c] == 0 {
			t.fails = append(t.fails, finding{sev: 1e300, text: fmt.Sprintf("%s was judged in no case (never engaged, skipped, or only above its max_bytes): the probe shows nothing about it", c)})
		}
	}
}

// positiveControls writes a detail line for each positive control the rule failed somewhere and
// returns a description of each one it passed everywhere (the rule is blind to that fault).
func (t *calibratedTally) positiveControls() []string {
	var posBlind []string
	for _, pc := range t.positives {
		if t.posFailed[pc] > 0 {
			fmt.Fprintf(&t.details, "positive control %s (%s): fails in %d of %d cases, e.g. %s\n", pc, t.byName[pc].Fault, t.posFailed[pc], t.posCases[pc], t.posFirst[pc])
			continue
		}
		hint := ""
		if t.posFaulted[pc] == 0 {
			hint = "; its fault was never active (faulted_calls 0 everywhere: no size, mode or call reached it)"
		}
		posBlind = append(posBlind, fmt.Sprintf("positive control %s (%s) passes all %d cases it was judged in%s", pc, t.byName[pc].Fault, t.posCases[pc], hint))
	}
	return posBlind
}

// setMetrics fills v's metrics from the tally of a probe with the given number of cases, of whose
// positive controls blind passed everywhere.
func (t *calibratedTally) setMetrics(v *Verdict, cases, blind int) {
	v.Metrics["cases"] = float64(cases)
	v.Metrics["algorithm_runs"] = float64(t.ran)
	v.Metrics["max_nrmse_ratio"] = t.cal.MaxNRMSERatio
	v.Metrics["calibrated"] = 1
	v.Metrics["negative_controls"] = float64(len(t.twins) + 1)
	v.Metrics["positive_controls"] = float64(len(t.positives))
	v.Metrics["positive_controls_failing"] = float64(len(t.positives) - blind)
	if t.worstCand >= 0 {
		v.Metrics["candidate_worst_nrmse_ratio"] = t.worstCand
	}
	if t.worstNeg >= 0 {
		v.Metrics["negative_control_worst_nrmse_ratio"] = t.worstNeg
	}
	v.Metrics["candidate_max_ulp_where_bitwise"] = t.maxCandULPFloor
}

// moreSuffix is " (and n-1 more)" when n findings stand behind the one a message names.
func moreSuffix(n int) string {
	if n > 1 {
		return fmt.Sprintf(" (and %d more)", n-1)
	}
	return ""
}

// bySeverity orders findings most severe first, keeping the order of equals.
func bySeverity(f []finding) {
	sort.SliceStable(f, func(i, j int) bool { return f[i].sev > f[j].sev })
}

// conclude sets v's outcome and message: a failing negative control is an error, then a failing
// candidate a failure, then a blind positive control an error; otherwise a pass.
func (t *calibratedTally) conclude(v *Verdict, cases int, posBlind []string) {
	switch {
	case len(t.negFails) > 0:
		bySeverity(t.negFails)
		v.Outcome = Error
		v.Message = fmt.Sprintf("%s: calibration does not hold: %s%s; the bound %gx is inside this testbed's legitimate spread (recalibrate, numerics-equivalence.md §9.2)", v.Name, t.negFails[0].text, moreSuffix(len(t.negFails)), t.cal.MaxNRMSERatio)
	case len(t.fails) > 0:
		bySeverity(t.fails)
		v.Outcome = Fail
		v.Message = fmt.Sprintf("%s: %s%s", v.Name, t.fails[0].text, moreSuffix(len(t.fails)))
		if len(posBlind) > 0 {
			v.Message += "; also " + posBlind[0]
		}
	case len(posBlind) > 0:
		v.Outcome = Error
		v.Message = fmt.Sprintf("%s: calibration does not hold: %s%s, so a pass would not show a broken kernel fails", v.Name, posBlind[0], moreSuffix(len(posBlind)))
	default:
		v.Outcome = Pass
		v.Message = t.passMessage(v.Name, cases)
	}
}

// passMessage is the message of a passing verdict named name over cases cases: what the judged
// candidates scored and how the controls behaved.
func (t *calibratedTally) passMessage(name string, cases int) string {
	var judgedNames []string
	for _, c := range t.candidates {
		if t.judged[c] {
			judgedNames = append(judgedNames, c)
		}
	}
	sort.Strings(judgedNames)
	msg := fmt.Sprintf("%s: calibrated rule holds over %d cases: %s within %gx of the best correct algorithm's NRMSE against the oracle",
		name, cases, strings.Join(judgedNames, ", "), t.cal.MaxNRMSERatio)
	if t.worstCandText != "" {
		msg += fmt.Sprintf(" (worst %.3gx, %s)", t.worstCand, t.worstCandText)
	}
	msg += fmt.Sprintf(", near-bitwise where the correct algorithms equal it (max %g ULP), exact on integer inputs, custom path taken in every call; %d negative controls pass", t.maxCandULPFloor, len(t.twins)+1)
	if t.worstNeg >= 0 {
		msg += fmt.Sprintf(" (worst %.3gx)", t.worstNeg)
	}
	msg += fmt.Sprintf(", %d positive controls fail", len(t.positives))
	return msg
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
