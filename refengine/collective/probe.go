package collective

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/reckon-ci/reckon/wire"
)

// ProbeOptions configures an op-level allreduce probe run.
type ProbeOptions struct {
	WorldSize int      // ranks, >= 2
	Sizes     []int64  // message sizes in bytes per rank
	DTypes    []string // "float32" | "bfloat16"
	Inputs    []string // "random" | "wide" | "order_sensitive" | "integer"
	Seed      uint64
	Repeats   int // timed runs per algorithm and case; the median is reported
	// Calls is how many calls of every algorithm each case scores at least, each on a fresh
	// payload (0: DefaultProbeCalls).
	Calls int
	// MinSamples raises a case's calls until calls x elements reaches it (0: no raise; the CLI's
	// default is DefaultMinSamples; capped at MaxProbeCalls): the NRMSE of a small message over a few calls is too noisy to
	// calibrate against (a correct twin can score 1.5x another by chance).
	MinSamples int
	// CustomMaxBytes is the custom path's size limit: the candidate one_shot takes messages up to
	// it and hands larger ones to the ring, as the engine does (0: no limit).
	CustomMaxBytes int64
	// ScaleFault is the scale positive control's factor minus 1 (0: DefaultScaleFault).
	ScaleFault float64
	// DropAbove: the drop_peer positive control leaves the last rank out of messages above this
	// many bytes.
	DropAbove int64
	// NoControls leaves the positive controls out (a probe the calibrated rule rejects).
	NoControls bool
	// CandidateFault injects a fault into the candidate itself, to record a broken kernel:
	// "" (none), "scale", "drop_peer" (above DropAbove), "stale" or "fallback" (the custom path
	// silently hands every call to the ring).
	CandidateFault string
}

// Defaults of ProbeOptions.
const (
	DefaultProbeCalls = 4
	DefaultMinSamples = 16384
	MaxProbeCalls     = 256
	DefaultScaleFault = 1e-2
)

// MaxProbeBytes bounds WorldSize*size for one case (each case holds several copies of it).
const MaxProbeBytes = 1 << 30

// ProbeSource is wire.AllReduceProbe.Source for this implementation.
const ProbeSource = "refengine"

// ProbeOracle describes the probe's oracle (wire.AllReduceProbeCalibration.Oracle).
const ProbeOracle = "every rank's payload, float32 sum in rank order 0..n-1, one rounding to the dtype"

// Probe algorithm names beyond the collective's own.
const (
	// RingRotated is the ring over the rank order rotated by one: the same algorithm with another
	// rank mapping, so each chunk's sum starts at another rank (NCCL: another channel or ring).
	RingRotated = "ring_rotated"
)

// probeFaults are the positive controls' faults, in output order.
var probeFaults = []string{"scale", "drop_peer", "stale"}

// probeAlg is one algorithm of the probe's roster.
type probeAlg struct {
	role wire.AllReduceProbeRole
	// run reduces work (one call) and reports whether the custom path was taken and whether a
	// fault altered the result.
	run func(work [][]float32, size int64, p precision) (engaged, faulted bool)
}

// Probe runs the roster on every (size, dtype, inputs) case, each algorithm on the same fresh
// payloads (Calls calls per case), and scores each against the fixed-order oracle (float32 sum in
// rank order, one rounding: NRMSE and max ULP), the float64 sum (the v1 fields) and the reference
// ring. The roster: ring (reference), tree and ring_rotated (twins, the negative controls),
// one_shot (the candidate, up to CustomMaxBytes; the ring above), and one_shot with a fault
// injected (the positive controls: output x (1+ScaleFault), the last rank dropped above
// DropAbove, the previous call's result). ctx is checked between cases.
func Probe(ctx context.Context, o ProbeOptions) (*wire.AllReduceProbe, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Calls == 0 {
		o.Calls = DefaultProbeCalls
	}
	if o.ScaleFault == 0 {
		o.ScaleFault = DefaultScaleFault
	}
	p := &wire.AllReduceProbe{
		Schema:    wire.AllReduceProbeSchema,
		Source:    ProbeSource,
		WorldSize: o.WorldSize,
		Device:    "cpu (reference engine, simulated ranks)",
		Reference: string(Ring),
		Results:   []wire.AllReduceProbeCase{},
	}
	for _, size := range o.Sizes {
		for _, dt := range o.DTypes {
			for _, in := range o.Inputs {
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("allreduce probe interrupted: %w", err)
				}
				algs := o.roster()
				p.Results = append(p.Results, probeCase(o, algs, size, dt, in))
				if p.Calibration == nil {
					cal := &wire.AllReduceProbeCalibration{Oracle: ProbeOracle}
					for _, a := range algs {
						cal.Roles = append(cal.Roles, a.role)
					}
					p.Calibration = cal
				}
			}
		}
	}
	return p, nil
}

// roster builds the probe's algorithms; state (the stale fault's previous result) is per case.
func (o ProbeOptions) roster() []probeAlg {
	plain := func(alg Algorithm) func([][]float32, int64, precision) (bool, bool) {
		return func(w [][]float32, _ int64, p precision) (bool, bool) {
			run(alg, w, p)
			return false, false
		}
	}
	algs := []probeAlg{
		{role: wire.AllReduceProbeRole{Algorithm: string(Ring), Role: wire.RoleReference, Setting: "NCCL-style ring, partial sums rounded to the dtype at every hop"}, run: plain(Ring)},
		{role: wire.AllReduceProbeRole{Algorithm: string(Tree), Role: wire.RoleTwin, Setting: "NCCL_ALGO=Tree (binary tree, rounded at every level)"}, run: plain(Tree)},
		{role: wire.AllReduceProbeRole{Algorithm: RingRotated, Role: wire.RoleTwin, Setting: "the ring over the rank order rotated by one (another rank mapping)"},
			run: func(w [][]float32, _ int64, p precision) (bool, bool) {
				rot := append(append([][]float32{}, w[1:]...), w[0])
				run(Ring, rot, p)
				return false, false
			}},
	}
	cand := wire.AllReduceProbeRole{Algorithm: string(OneShot), Role: wire.RoleCandidate, MaxBytes: o.CustomMaxBytes,
		Setting: "custom one-shot (float32 accumulation in rank order), the ring above max_bytes"}
	if o.CandidateFault != "" {
		cand.Setting += "; injected fault: " + o.CandidateFault
	}
	algs = append(algs, probeAlg{role: cand, run: o.custom(o.CandidateFault)})
	if !o.NoControls {
		for _, f := range probeFaults {
			r := wire.AllReduceProbeRole{Algorithm: string(OneShot) + "+" + f, Role: wire.RolePositiveControl, Of: string(OneShot), Fault: f}
			switch f {
			case "scale":
				r.Setting = fmt.Sprintf("output x (1 + %g)", o.ScaleFault)
			case "drop_peer":
				r.AboveBytes = o.DropAbove
				r.Setting = fmt.Sprintf("the last rank's payload left out above %d bytes", o.DropAbove)
			case "stale":
				r.Setting = "the previous call's result returned (the first call of a case is correct)"
			}
			algs = append(algs, probeAlg{role: r, run: o.custom(f)})
		}
	}
	return algs
}

// custom is the candidate's path as the engine dispatches it (refengine/tp: the one-shot up to the
// size limit, the ring above it), with fault (if any) injected the way the engine's fault options
// do: drop_peer sums all but the last rank and hands that to every rank, stale returns the
// previous call's result, scale multiplies the result, fallback silently runs the ring.
func (o ProbeOptions) custom(fault string) func([][]float32, int64, precision) (bool, bool) {
	var prev []float32
	return func(w [][]float32, size int64, p precision) (bool, bool) {
		n := len(w)
		if (o.CustomMaxBytes > 0 && size > o.CustomMaxBytes) || fault == "fallback" {
			run(Ring, w, p)
			return false, false
		}
		faulted := false
		if fault == "drop_peer" && size > o.DropAbove {
			run(OneShot, w[:n-1], p)
			copy(w[n-1], w[0])
			faulted = true
		} else {
			run(OneShot, w, p)
		}
		switch fault {
		case "scale":
			f := float32(1 + o.ScaleFault)
			for _, b := range w {
				for i := range b {
					b[i] *= f
				}
				if p == bf16 {
					RoundBF16(b)
				}
			}
			faulted = true
		case "stale":
			if prev == nil {
				prev = append([]float32(nil), w[0]...)
			} else {
				for i, v := range w[0] {
					old := prev[i]
					prev[i] = v
					for r := range w {
						w[r][i] = old
					}
				}
				faulted = true
			}
		}
		return true, faulted
	}
}

func (o ProbeOptions) validate() error {
	if o.WorldSize < 2 {
		return fmt.Errorf("--tp %d: expected at least 2 ranks", o.WorldSize)
	}
	if len(o.Sizes) == 0 || len(o.DTypes) == 0 || len(o.Inputs) == 0 {
		return errors.New("expected at least one size, dtype and input kind")
	}
	for _, dt := range o.DTypes {
		if dt != "float32" && dt != "bfloat16" {
			return fmt.Errorf("--dtype %q: expected float32 or bfloat16", dt)
		}
	}
	for _, in := range o.Inputs {
		switch in {
		case "random", "wide", "order_sensitive", "integer":
		default:
			return fmt.Errorf("--inputs %q: expected random, wide, order_sensitive or integer", in)
		}
	}
	for _, s := range o.Sizes {
		for _, dt := range o.DTypes {
			if s <= 0 || s%dtypeBytes(dt) != 0 {
				return fmt.Errorf("--sizes %d: expected a positive multiple of %d bytes (the %s element size)", s, dtypeBytes(dt), dt)
			}
		}
		if s > MaxProbeBytes/int64(o.WorldSize) {
			return fmt.Errorf("--sizes %s with --tp %d: %s in all, above the probe's limit of %s", formatBytes(s), o.WorldSize, formatBytes(s*int64(o.WorldSize)), formatBytes(MaxProbeBytes))
		}
	}
	if o.Repeats < 1 {
		return fmt.Errorf("--repeats %d: expected at least 1", o.Repeats)
	}
	if o.MinSamples < 0 {
		return fmt.Errorf("--min-samples %d: expected at least 0", o.MinSamples)
	}
	if o.Calls < 0 || o.Calls == 1 {
		return fmt.Errorf("--calls %d: expected at least 2 (a fresh payload on every call needs more than one call)", o.Calls)
	}
	if o.CustomMaxBytes < 0 || o.DropAbove < 0 || o.ScaleFault < 0 || math.IsInf(o.ScaleFault, 0) || math.IsNaN(o.ScaleFault) {
		return fmt.Errorf("--custom-max-bytes %d, --drop-above %d, --scale-fault %g: expected sizes >= 0 and a finite factor >= 0", o.CustomMaxBytes, o.DropAbove, o.ScaleFault)
	}
	switch o.CandidateFault {
	case "", "scale", "drop_peer", "stale", "fallback":
	default:
		return fmt.Errorf("--candidate-fault %q: expected scale, drop_peer, stale or fallback", o.CandidateFault)
	}
	return nil
}

func dtypeBytes(dt string) int64 {
	if dt == "bfloat16" {
		return 2
	}
	return 4
}

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
	ref := make([]float64, l)
	mag := make([]float64, l)
	refDT := make([]float32, l)
	oracle := make([]float32, l)
	for call := 0; call < calls; call++ {
		in := makeInputsCall(o.Seed, n, l, dt, inputs, call)
		for i := range ref {
			ref[i], mag[i] = 0, 0
		}
		for r := 0; r < n; r++ {
			for i, v := range in[r] {
				ref[i] += float64(v)
				mag[i] += math.Abs(float64(v))
			}
		}
		for i, v := range ref {
			if prec == bf16 {
				refDT[i] = BF16FromFloat64(v)
			} else {
				refDT[i] = float32(v)
			}
		}
		// The oracle: float32 sum in rank order, one rounding to the dtype.
		for i := range oracle {
			acc := in[0][i]
			for r := 1; r < n; r++ {
				acc += in[r][i]
			}
			oracle[i] = acc
		}
		if prec == bf16 {
			RoundBF16(oracle)
		}
		for k, alg := range algs {
			a := &accs[k]
			var engaged, faulted bool
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
			if engaged {
				a.engaged++
			}
			if faulted {
				a.faulted++
			}
			abs, rel, exact := score(work, ref, mag, refDT)
			a.maxAbs, a.maxRel = max(a.maxAbs, abs), max(a.maxRel, rel)
			a.exact = a.exact && exact
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
			if k == 0 {
				for r := range work {
					copy(refOut[r], work[r])
				}
				continue
			}
			pr := comparePair(work, refOut, mag)
			a.hasPair = true
			a.pairAbs, a.pairRel = max(a.pairAbs, pr.MaxAbsDiff), max(a.pairRel, pr.MaxRelDiff)
			a.pairSame = a.pairSame && pr.Identical
		}
	}
	for k, alg := range algs {
		a := accs[k]
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
		c.Algorithms = append(c.Algorithms, res)
		if a.hasPair {
			c.Pairs = append(c.Pairs, wire.AllReduceProbePair{A: alg.role.Algorithm, B: algs[0].role.Algorithm,
				MaxAbsDiff: finiteOr(a.pairAbs), MaxRelDiff: finiteOr(a.pairRel), Identical: a.pairSame})
		}
	}
	return c
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

// ParseSizes parses a comma-separated list of byte sizes: plain byte counts or numbers with a
// unit B, KiB, MiB, GiB (powers of 1024) or KB, MB, GB (powers of 1000), e.g. "1KiB,64KiB,1MiB".
func ParseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("--sizes %q: empty entry", s)
		}
		num, unit := f, ""
		if i := strings.IndexFunc(f, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }); i >= 0 {
			num, unit = f[:i], strings.TrimSpace(f[i:])
		}
		mult, ok := map[string]float64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
		if !ok {
			return nil, fmt.Errorf("--sizes entry %q: unknown unit %q: expected B, KiB, MiB, GiB, KB, MB or GB", f, unit)
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || num == "" {
			return nil, fmt.Errorf("--sizes entry %q: expected a number of bytes with an optional unit (e.g. 4096, 64KiB)", f)
		}
		b := v * mult
		if b != math.Trunc(b) || b <= 0 || b > 1<<40 {
			return nil, fmt.Errorf("--sizes entry %q: expected a positive whole number of bytes", f)
		}
		out = append(out, int64(b))
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func formatBytes(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", b>>10)
	}
	return fmt.Sprintf("%dB", b)
}

// RunProbeCLI runs `refengine probe-allreduce` with args (the arguments after the subcommand name)
// and returns the process exit code: 0 when the probe ran and the contract held, 1 when an
// algorithm was not exact on integer inputs or left ranks with different values, 2 on bad flags,
// 3 when the result could not be written.
//
//	probe-allreduce --tp N --sizes LIST [--dtype float32,bfloat16]
//	                [--inputs random,wide,order_sensitive,integer] [--calls C] [--seed S]
//	                [--repeats K] [--custom-max-bytes B] [--drop-above B] [--scale-fault X]
//	                [--no-controls] [--candidate-fault F] [--json] [--out FILE]
func RunProbeCLI(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe-allreduce", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tp := fs.Int("tp", 0, "number of ranks (tensor-parallel size), at least 2")
	sizes := fs.String("sizes", "", "comma-separated message sizes per rank: bytes or with a unit (1KiB,64KiB,1MiB)")
	dtypes := fs.String("dtype", "float32", "comma-separated dtypes: float32, bfloat16")
	inputs := fs.String("inputs", "random", "comma-separated input kinds: random, wide, order_sensitive, integer")
	calls := fs.Int("calls", DefaultProbeCalls, "calls of every algorithm per case at least, each on a fresh payload (at least 2)")
	minSamples := fs.Int("min-samples", DefaultMinSamples, fmt.Sprintf("more calls for small messages, until calls x elements reaches this (at most %d calls)", MaxProbeCalls))
	customMax := fs.String("custom-max-bytes", "0", "the custom path's size limit: one_shot hands larger messages to the ring (0: no limit)")
	dropAbove := fs.String("drop-above", "64KiB", "the drop_peer positive control leaves the last rank out of messages above this size")
	scaleFault := fs.Float64("scale-fault", DefaultScaleFault, "the scale positive control multiplies the output by 1+X")
	noControls := fs.Bool("no-controls", false, "leave the positive controls out (the calibrated rule then rejects the probe)")
	candFault := fs.String("candidate-fault", "", "inject a fault into the candidate itself, to record a broken kernel: scale, drop_peer, stale or fallback")
	seed := fs.Uint64("seed", 1, "random seed")
	repeats := fs.Int("repeats", 5, "timed runs per algorithm and case (median reported)")
	asJSON := fs.Bool("json", false, "print the reckon.allreduce-probe/v2 JSON instead of a table")
	out := fs.String("out", "", "also write the JSON to this file (atomically)")
	check := fs.String("check", "", "instead of probing, read a probe JSON file (from any probe, e.g. ci/probes/torch_allreduce_probe.py), validate it against the contract and report")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: refengine probe-allreduce --tp N --sizes LIST [--dtype LIST] [--inputs LIST] [--seed S] [--repeats K] [--json] [--out FILE]")
		fmt.Fprintln(stderr, "       refengine probe-allreduce --check FILE [--json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "probe-allreduce: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *check != "" {
		return runCheck(*check, *asJSON, stdout, stderr)
	}
	if *sizes == "" {
		fmt.Fprintln(stderr, "probe-allreduce: --sizes is required (e.g. --sizes 1KiB,64KiB,1MiB)")
		return 2
	}
	sz, err := ParseSizes(*sizes)
	if err != nil {
		fmt.Fprintf(stderr, "probe-allreduce: %v\n", err)
		return 2
	}
	var limits [2]int64
	for i, f := range []struct{ name, val string }{{"--custom-max-bytes", *customMax}, {"--drop-above", *dropAbove}} {
		if f.val == "0" {
			continue
		}
		v, err := ParseSizes(f.val)
		if err != nil || len(v) != 1 {
			fmt.Fprintf(stderr, "probe-allreduce: %s %q: expected one size (e.g. 512KiB), or 0\n", f.name, f.val)
			return 2
		}
		limits[i] = v[0]
	}
	o := ProbeOptions{WorldSize: *tp, Sizes: sz, DTypes: splitList(*dtypes), Inputs: splitList(*inputs), Seed: *seed, Repeats: *repeats,
		Calls: *calls, MinSamples: *minSamples, CustomMaxBytes: limits[0], DropAbove: limits[1], ScaleFault: *scaleFault, NoControls: *noControls, CandidateFault: *candFault}
	if *scaleFault == 0 {
		fmt.Fprintln(stderr, "probe-allreduce: --scale-fault 0: expected a positive factor (e.g. 0.01)")
		return 2
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "probe-allreduce: %v\n", err)
		return 2
	}
	p, err := Probe(context.Background(), o)
	if err != nil {
		fmt.Fprintf(stderr, "probe-allreduce: %v\n", err)
		return 3
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "probe-allreduce: encoding result: %v\n", err)
		return 3
	}
	data = append(data, '\n')
	if *out != "" {
		if err := writeFileAtomic(*out, data); err != nil {
			fmt.Fprintf(stderr, "probe-allreduce: %v\n", err)
			return 3
		}
	}
	if *asJSON {
		if _, err := stdout.Write(data); err != nil {
			fmt.Fprintf(stderr, "probe-allreduce: writing stdout: %v\n", err)
			return 3
		}
	} else if err := WriteProbeTable(stdout, p); err != nil {
		fmt.Fprintf(stderr, "probe-allreduce: writing stdout: %v\n", err)
		return 3
	}
	if v := ContractViolations(p); len(v) > 0 {
		for _, s := range v {
			fmt.Fprintf(stderr, "probe-allreduce: FAIL %s\n", s)
		}
		return 1
	}
	return 0
}

// runCheck validates a probe file and reports like a probe run: 0 when the contract held, 1 on
// violations, 2 when the file is unreadable or malformed.
func runCheck(path string, asJSON bool, stdout, stderr io.Writer) int {
	p, err := ReadProbe(path)
	if err != nil {
		fmt.Fprintf(stderr, "probe-allreduce --check: %v\n", err)
		return 2
	}
	if asJSON {
		data, err := json.MarshalIndent(p, "", "  ")
		if err == nil {
			_, err = stdout.Write(append(data, '\n'))
		}
		if err != nil {
			fmt.Fprintf(stderr, "probe-allreduce --check: writing stdout: %v\n", err)
			return 3
		}
	} else if err := WriteProbeTable(stdout, p); err != nil {
		fmt.Fprintf(stderr, "probe-allreduce --check: writing stdout: %v\n", err)
		return 3
	}
	if v := ContractViolations(p); len(v) > 0 {
		for _, s := range v {
			fmt.Fprintf(stderr, "probe-allreduce: FAIL %s\n", s)
		}
		return 1
	}
	fmt.Fprintf(stdout, "contract holds: %d cases, every algorithm exact on integer inputs and identical across ranks (positive controls excepted; `reckon probe check` judges the calibrated rule)\n", len(p.Results))
	return 0
}

// ContractViolations lists what the op-level contract forbids in p: an algorithm that is not
// exact on integer inputs, or one that left ranks holding different values. Positive controls (a
// fault injected on purpose) are not held to it; `reckon probe check` judges them.
func ContractViolations(p *wire.AllReduceProbe) []string {
	control := map[string]bool{}
	if p.Calibration != nil {
		for _, r := range p.Calibration.Roles {
			control[r.Algorithm] = r.Role == wire.RolePositiveControl
		}
	}
	var v []string
	for _, c := range p.Results {
		for _, a := range c.Algorithms {
			if a.Skipped != "" || control[a.Name] {
				continue
			}
			where := fmt.Sprintf("%s %s %s %s", formatBytes(c.SizeBytes), c.DType, c.Inputs, a.Name)
			if c.Inputs == "integer" && !a.Exact {
				v = append(v, fmt.Sprintf("%s: not exact on integer inputs (max abs err %g)", where, a.MaxAbsErr))
			}
			if a.RanksIdentical != nil && !*a.RanksIdentical {
				v = append(v, where+": ranks hold different results")
			}
		}
	}
	return v
}

// WriteProbeTable renders p as a readable table: one row per algorithm and per pair.
func WriteProbeTable(w io.Writer, p *wire.AllReduceProbe) error {
	fmt.Fprintf(w, "allreduce probe: source=%s world_size=%d reference=%s device=%s\n", p.Source, p.WorldSize, p.Reference, p.Device)
	fmt.Fprintln(w, "errors are against the float64 sum; rel = |x-ref| / sum of |addends| (a correct sum stays below (n-1)*unit roundoff); nrmse and max_ulp against the fixed-order oracle (v2)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "size\tdtype\tinputs\talgorithm\tmax_abs_err\tmax_rel_err\texact\tranks_identical\tmedian_us\tnrmse\tmax_ulp\tengaged\t")
	for _, c := range p.Results {
		for _, a := range c.Algorithms {
			if a.Skipped != "" {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\tskipped: %s\t\t\t\t\t\n", formatBytes(c.SizeBytes), c.DType, c.Inputs, a.Name, a.Skipped)
				continue
			}
			med, same := "-", "-"
			if a.MedianUs != nil {
				med = fmt.Sprintf("%.1f", *a.MedianUs)
			}
			if a.RanksIdentical != nil {
				same = yesNo(*a.RanksIdentical)
			}
			nrmse, ulp, eng := "-", "-", "-"
			if a.NRMSE != nil {
				nrmse = fmt.Sprintf("%.3g", *a.NRMSE)
			}
			if a.MaxULP != nil {
				ulp = fmt.Sprintf("%g", *a.MaxULP)
			}
			if a.EngagedCalls != nil {
				eng = fmt.Sprintf("%d/%d", *a.EngagedCalls, c.Calls)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.3g\t%.3g\t%s\t%s\t%s\t%s\t%s\t%s\t\n", formatBytes(c.SizeBytes), c.DType, c.Inputs, a.Name, a.MaxAbsErr, a.MaxRelErr, yesNo(a.Exact), same, med, nrmse, ulp, eng)
		}
		for _, pr := range c.Pairs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s vs %s\t%.3g\t%.3g\t%s\t\t\t\t\t\t\n", formatBytes(c.SizeBytes), c.DType, c.Inputs, pr.A, pr.B, pr.MaxAbsDiff, pr.MaxRelDiff, "identical="+yesNo(pr.Identical))
		}
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// writeFileAtomic writes data to a temporary file in path's directory and renames it into place.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
