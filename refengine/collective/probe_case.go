// probe_case.go holds the measurement of one probe case: the inputs each call draws, the
// reduction against the oracle, and the error scores (ULP distance, relative error).

package collective

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/reckon-ci/reckon/wire"
)

// caseAcc accumulates one algorithm's scores over a case's calls.
type caseAcc struct {
	sse, sso          float64
	maxULP            float64
	maxAbs, maxRel    float64
	exact, same       bool
	engaged, faulted  int64
	times             []float64
	pairAbs, pairRel  float64
	pairSame, hasPair bool
}

// probeCase measures one (size, dtype, inputs) case: Calls calls of every algorithm, each on a
// fresh payload.
func probeCase(o ProbeOptions, algs []probeAlg, size int64, dt, inputs string) wire.AllReduceProbeCase {
	n, l := o.WorldSize, int(size/dtypeBytes(dt))
	calls := max(o.Calls, min(MaxProbeCalls, (o.MinSamples+l-1)/l))
	prec := f32
	if dt == "bfloat16" {
		prec = bf16
	}
	c := wire.AllReduceProbeCase{SizeBytes: size, Elements: int64(l), DType: dt, Inputs: inputs,
		Mode: "eager", Calls: int64(calls), CallsPerSync: 1}
	accs := make([]caseAcc, len(algs))
	for i := range accs {
		accs[i].exact, accs[i].same, accs[i].pairSame = true, true, true
	}
	work := make([][]float32, n)
	for r := range work {
		work[r] = make([]float32, l)
	}
	refOut := make([][]float32, n)
	for r := range refOut {
		refOut[r] = make([]float32, l)
	}
	cr := callRefs{ref: make([]float64, l), mag: make([]float64, l), refDT: make([]float32, l), oracle: make([]float32, l)}
	for call := 0; call < calls; call++ {
		in := makeInputsCall(o.Seed, n, l, dt, inputs, call)
		cr.compute(in, prec)
		for k, alg := range algs {
			a := &accs[k]
			engaged, faulted := runProbeAlg(o, alg, work, in, size, prec, a)
			if engaged {
				a.engaged++
			}
			if faulted {
				a.faulted++
			}
			a.scoreCall(work, &cr, prec)
			if k == 0 {
				for r := range work {
					copy(refOut[r], work[r])
				}
				continue
			}
			pr := comparePair(work, refOut, cr.mag)
			a.hasPair = true
			a.pairAbs, a.pairRel = max(a.pairAbs, pr.MaxAbsDiff), max(a.pairRel, pr.MaxRelDiff)
			a.pairSame = a.pairSame && pr.Identical
		}
	}
	for k, alg := range algs {
		a := accs[k]
		c.Algorithms = append(c.Algorithms, a.result(alg))
		if a.hasPair {
			c.Pairs = append(c.Pairs, wire.AllReduceProbePair{A: alg.role.Algorithm, B: algs[0].role.Algorithm,
				MaxAbsDiff: finiteOr(a.pairAbs), MaxRelDiff: finiteOr(a.pairRel), Identical: a.pairSame})
		}
	}
	return c
}

// callRefs are the references of one call's inputs, per element: the exact (float64) sum and
// sum of magnitudes, that sum rounded to the dtype, and the oracle.
type callRefs struct {
	ref, mag      []float64
	refDT, oracle []float32
}

// compute fills the references for the inputs in (one slice per rank) at precision prec. The
// oracle is the float32 sum in rank order, with one rounding to the dtype.
func (cr *callRefs) compute(in [][]float32, prec precision) {
	n := len(in)
	for i := range cr.ref {
		cr.ref[i], cr.mag[i] = 0, 0
	}
	for r := 0; r < n; r++ {
		for i, v := range in[r] {
			cr.ref[i] += float64(v)
			cr.mag[i] += math.Abs(float64(v))
		}
	}
	for i, v := range cr.ref {
		if prec == bf16 {
			cr.refDT[i] = BF16FromFloat64(v)
		} else {
			cr.refDT[i] = float32(v)
		}
	}
	// The oracle: float32 sum in rank order, one rounding to the dtype.
	for i := range cr.oracle {
		acc := in[0][i]
		for r := 1; r < n; r++ {
			acc += in[r][i]
		}
		cr.oracle[i] = acc
	}
	if prec == bf16 {
		RoundBF16(cr.oracle)
	}
}

// runProbeAlg runs alg on a fresh copy of the inputs in (left in work), o.Repeats times for a
// stateless algorithm and once for a candidate or positive control, recording each run's time
// in a. It returns whether the first run took the custom path and injected its fault.
func runProbeAlg(o ProbeOptions, alg probeAlg, work, in [][]float32, size int64, prec precision, a *caseAcc) (engaged, faulted bool) {
	for rep := 0; rep < max(1, o.Repeats); rep++ {
		for r := range work {
			copy(work[r], in[r])
		}
		start := time.Now()
		if prec == bf16 {
			for _, b := range work {
				RoundBF16(b)
			}
		}
		e, f := alg.run(work, size, prec)
		a.times = append(a.times, float64(time.Since(start).Nanoseconds())/1e3)
		if rep == 0 {
			engaged, faulted = e, f
		}
		if alg.role.Role == wire.RolePositiveControl || alg.role.Role == wire.RoleCandidate {
			break // stateful (stale): one run per call, and its time
		}
	}
	return engaged, faulted
}

// scoreCall adds one call's output (work, one slice per rank) to the scores: errors against the
// exact sum, squared error and ULP distance against the oracle, and agreement across ranks.
func (a *caseAcc) scoreCall(work [][]float32, cr *callRefs, prec precision) {
	abs, rel, exact := score(work, cr.ref, cr.mag, cr.refDT)
	a.maxAbs, a.maxRel = max(a.maxAbs, abs), max(a.maxRel, rel)
	a.exact = a.exact && exact
	oracle := cr.oracle
	for r := range work {
		for i, v := range work[r] {
			d := float64(v) - float64(oracle[i])
			a.sse += d * d
			a.sso += float64(oracle[i]) * float64(oracle[i])
			a.maxULP = max(a.maxULP, ulpDistance(v, oracle[i], prec == bf16))
			if r > 0 && math.Float32bits(v) != math.Float32bits(work[0][i]) {
				a.same = false
			}
		}
	}
}

// result is alg's entry in the case: its scores over every call (NRMSE against the oracle, the
// median time), and for a candidate or positive control its engagement and fault counters.
func (a caseAcc) result(alg probeAlg) wire.AllReduceProbeAlgorithm {
	nrmse := 0.0
	switch {
	case a.sso > 0:
		nrmse = math.Sqrt(a.sse / a.sso)
	case a.sse > 0:
		nrmse = 1e300
	}
	same := a.same
	res := wire.AllReduceProbeAlgorithm{Name: alg.role.Algorithm, MaxAbsErr: finiteOr(a.maxAbs), MaxRelErr: finiteOr(a.maxRel), Exact: a.exact,
		MedianUs: ptr(median(a.times)), RanksIdentical: &same, NRMSE: ptr(finiteOr(nrmse)), MaxULP: ptr(finiteOr(a.maxULP))}
	if r := alg.role.Role; r == wire.RoleCandidate || r == wire.RolePositiveControl {
		res.EngagedCalls = ptr(a.engaged)
		if r == wire.RolePositiveControl {
			res.FaultedCalls = ptr(a.faulted)
		}
	}
	return res
}

// finiteOr returns x, or 1e300 for NaN and ±Inf (garbage output scores as a huge finite error,
// which the contract's strict JSON can carry).
func finiteOr(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 1e300
	}
	return x
}

// ulpDistance is the distance of a and b in units in the last place of the dtype (bf16 when
// bf16, else float32): the difference of their bit patterns read as sign-magnitude integers
// (+0 and -0 are the same). NaN is 1e300.
func ulpDistance(a, b float32, bf bool) float64 {
	if a != a || b != b {
		return 1e300
	}
	ord := func(x float32) int64 {
		bits := int64(math.Float32bits(x))
		m := bits & 0x7fffffff
		if bf {
			m >>= 16
		}
		if bits&0x80000000 != 0 {
			return -m
		}
		return m
	}
	d := ord(a) - ord(b)
	if d < 0 {
		d = -d
	}
	return float64(d)
}

// score measures every rank's output against the float64 reference: the largest absolute and
// relative error (relErr) and whether every element equals the reference rounded to the dtype.
func score(out [][]float32, ref, mag []float64, refDT []float32) (maxAbs, maxRel float64, exact bool) {
	exact = true
	for r := range out {
		for i, v := range out[r] {
			d := math.Abs(float64(v) - ref[i])
			maxAbs = max(maxAbs, d)
			maxRel = max(maxRel, relErr(d, mag[i]))
			if v != refDT[i] { // value comparison: +0 == -0, NaN never exact
				exact = false
			}
		}
	}
	return maxAbs, maxRel, exact
}

// comparePair compares the outputs a with b on every rank; relative differences use the same
// denominator as the errors.
func comparePair(a, b [][]float32, mag []float64) wire.AllReduceProbePair {
	pr := wire.AllReduceProbePair{Identical: true}
	for r := range a {
		for i, va := range a[r] {
			vb := b[r][i]
			if math.Float32bits(va) != math.Float32bits(vb) {
				pr.Identical = false
			}
			d := math.Abs(float64(va) - float64(vb))
			pr.MaxAbsDiff = max(pr.MaxAbsDiff, d)
			pr.MaxRelDiff = max(pr.MaxRelDiff, relErr(d, mag[i]))
		}
	}
	return pr
}

// makeInputs builds the per-rank inputs of one case (its first call), deterministically from
// the seed and the case; see makeInputsCall.
func makeInputs(seed uint64, n, l int, dt, inputs string) [][]float32 {
	return makeInputsCall(seed, n, l, dt, inputs, 0)
}

// makeInputsCall builds the per-rank payload of call number call of one case, deterministically
// from the seed, the case and the call (a fresh payload on every call):
//   - random: standard normal values;
//   - wide: standard normal values times 2^k, k uniform in -20..20 (vLLM's determinism tests: a
//     float32 accumulator then no longer sums a few bf16 values exactly);
//   - order_sensitive: in column i, rank (i+call) mod n holds s·2^24, the next rank s, the next
//     -s·2^24, the others 0 (s = ±1 per column): 2^24 + 1 rounds to 2^24, so the result depends on
//     which two are added first (FlashInfer's order-sensitive columns);
//   - integer: integers in [-k, k] with k = floor(2^p / n) (p = 8 for bf16, 24 for float32, capped
//     at 1024), so every partial sum in any order is exactly representable and every algorithm
//     must be exact (nccl-tests).
//
// Values are rounded to bf16 for bfloat16.
func makeInputsCall(seed uint64, n, l int, dt, inputs string, call int) [][]float32 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%s/%s", n, l, dt, inputs)
	if call > 0 {
		fmt.Fprintf(h, "/%d", call)
	}
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	k := int64(1024)
	if dt == "bfloat16" {
		k = min(k, 256/int64(n))
	}
	var sign []float32
	if inputs == "order_sensitive" {
		sign = make([]float32, l)
		for i := range sign {
			sign[i] = 1
			if rng.IntN(2) == 0 {
				sign[i] = -1
			}
		}
	}
	in := make([][]float32, n)
	for r := range in {
		in[r] = make([]float32, l)
		for i := range in[r] {
			switch inputs {
			case "integer":
				in[r][i] = float32(rng.Int64N(2*k+1) - k)
			case "order_sensitive":
				switch mod(r-i-call, n) {
				case 0:
					in[r][i] = sign[i] * (1 << 24)
				case 1:
					in[r][i] = sign[i]
				case 2:
					in[r][i] = -sign[i] * (1 << 24)
				}
			case "wide":
				in[r][i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(41)-20))
			default:
				in[r][i] = float32(rng.NormFloat64())
			}
		}
		if dt == "bfloat16" {
			RoundBF16(in[r])
		}
	}
	return in
}

// relErr is the contract's relative error of one element: d = |out - ref| divided by mag, the sum
// of the magnitudes of the n addends. Any summation order with unit roundoff u errs by at most
// (n-1)·u·mag, so a correct algorithm stays below (n-1)·u however much the addends cancel. With
// mag = 0 every addend is zero and so must the error be; a non-zero error then counts as 1e300.
func relErr(d, mag float64) float64 {
	if mag > 0 {
		return d / mag
	}
	if d == 0 {
		return 0
	}
	return 1e300
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ptr[T any](v T) *T { return &v }
