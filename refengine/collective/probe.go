package collective

import (
	"context"
	"errors"
	"fmt"
	"math"

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
	// "" (none), "scale", "drop_peer" (above DropAbove), "stale", "rank_order" (every rank sums in
	// its own order), "accumulate_bf16" (a bf16 accumulator, bf16 data only) or "fallback" (the custom path
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
		if v, ok := kernelFault(fault, p); ok {
			// a faulty kernel: it changes how the sum is formed, not what is summed
			AllReduceOneShot(w, p == bf16, v)
			return true, n > 2
		}
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

// kernelFault is the one-shot variant of a kernel fault: "rank_order" (every rank sums in its
// own order) or "accumulate_bf16" (a bf16 accumulator; on float32 data the kernel accumulates in
// float32, so it is the correct one there and ok is false).
func kernelFault(fault string, p precision) (OneShotVariant, bool) {
	switch {
	case fault == "rank_order":
		return OneShotVariant{Order: OrderPerRank}, true
	case fault == "accumulate_bf16" && p == bf16:
		return OneShotVariant{AccumulateBF16: true}, true
	}
	return OneShotVariant{}, false
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
	case "", "scale", "drop_peer", "stale", "fallback", "rank_order", "accumulate_bf16":
	default:
		return fmt.Errorf("--candidate-fault %q: expected scale, drop_peer, stale, fallback, rank_order or accumulate_bf16", o.CandidateFault)
	}
	return nil
}

func dtypeBytes(dt string) int64 {
	if dt == "bfloat16" {
		return 2
	}
	return 4
}
