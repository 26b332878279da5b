package tp

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/refengine/collective"
	"github.com/reckon-ci/reckon/refengine/interconnect"
	"github.com/reckon-ci/reckon/refengine/model"
)

// reduceGroup is a group whose reduce() is called directly, on hand-made rank buffers.
func reduceGroup(t *testing.T, opts Options) *Group {
	t.Helper()
	opts.Interconnect = interconnect.Default(interconnect.NVLink)
	g, err := NewGroup(model.Generate(tinyConfig(t)), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func randBufs(seed uint64, n, l int) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 3))
	b := make([][]float32, n)
	for r := range b {
		b[r] = make([]float32, l)
		for i := range b[r] {
			b[r][i] = float32(rng.NormFloat64())
		}
	}
	return b
}

func cloneBufs(b [][]float32) [][]float32 {
	out := make([][]float32, len(b))
	for r := range b {
		out[r] = append([]float32(nil), b[r]...)
	}
	return out
}

// expect runs alg over a copy of in (the first ranks of it when ranks < len(in)) and returns
// rank 0's result.
func expect(alg collective.Algorithm, in [][]float32, ranks int) []float32 {
	b := cloneBufs(in[:ranks])
	collective.AllReduce(alg, b)
	return b[0]
}

// checkAll fails unless every rank of got holds want bit for bit.
func checkAll(t *testing.T, what string, got [][]float32, want []float32) {
	t.Helper()
	for r := range got {
		for i := range want {
			if math.Float32bits(got[r][i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: rank %d element %d = %v, want %v", what, r, i, got[r][i], want[i])
			}
		}
	}
}

const row = 8 // row width (hidden size) of the hand-made buffers

func TestFaultDropRank(t *testing.T) {
	g := reduceGroup(t, Options{TP: 4, Custom: true, CustomMaxBytes: 1 << 20, FaultDropRank: true, FaultDropRankAbove: 4 * row * 4})
	small, large := randBufs(1, 4, 4*row), randBufs(2, 4, 5*row) // 128 and 160 bytes
	b := cloneBufs(small)
	g.reduce(b, row)
	checkAll(t, "at the threshold", b, expect(collective.OneShot, small, 4))
	b = cloneBufs(large)
	g.reduce(b, row)
	checkAll(t, "above the threshold", b, expect(collective.OneShot, large, 3)) // the last rank is missing, on every rank
	if s := g.Stats(); s.CustomCalls != 2 || s.FaultedCalls != 1 || s.MaxCustomBytes != 5*row*4 {
		t.Errorf("stats %+v", s)
	}
}

func TestFaultStale(t *testing.T) {
	g := reduceGroup(t, Options{TP: 2, Custom: true, CustomMaxBytes: 1 << 20, FaultStale: true, FaultStaleAbove: 0})
	a, b, c := randBufs(1, 2, 2*row), randBufs(2, 2, 2*row), randBufs(3, 2, 2*row)
	other := randBufs(4, 2, 3*row)
	x := cloneBufs(a)
	g.reduce(x, row)
	checkAll(t, "first call of a size", x, expect(collective.OneShot, a, 2))
	x = cloneBufs(b)
	g.reduce(x, row)
	checkAll(t, "second call", x, expect(collective.OneShot, a, 2))
	x = cloneBufs(other)
	g.reduce(x, row)
	checkAll(t, "first call of another size", x, expect(collective.OneShot, other, 2))
	x = cloneBufs(c)
	g.reduce(x, row)
	checkAll(t, "third call", x, expect(collective.OneShot, b, 2))
	if s := g.Stats(); s.FaultedCalls != 2 {
		t.Errorf("faulted calls %d, want 2", s.FaultedCalls)
	}
}

func TestFaultScaleAndMinBatch(t *testing.T) {
	in := randBufs(5, 4, 3*row) // 3 tokens
	for _, tc := range []struct {
		minBatch int
		active   bool
	}{{0, true}, {3, true}, {4, false}} {
		g := reduceGroup(t, Options{TP: 4, Custom: true, CustomMaxBytes: 1 << 20, FaultAllReduceScale: -0.25, FaultMinBatch: tc.minBatch})
		x := cloneBufs(in)
		g.reduce(x, row)
		want := expect(collective.OneShot, in, 4)
		if tc.active {
			for i := range want {
				want[i] *= 0.75
			}
		}
		checkAll(t, "scale -0.25", x, want)
		if f := g.Stats().FaultedCalls; (f == 1) != tc.active {
			t.Errorf("min batch %d: faulted calls %d", tc.minBatch, f)
		}
	}
}

// TestFaultsSkipNCCL: a tensor above the custom buffer goes through NCCL (here the tree) and no
// fault touches it.
func TestFaultsSkipNCCL(t *testing.T) {
	g := reduceGroup(t, Options{TP: 4, Custom: true, CustomMaxBytes: 64, NCCLAlgorithm: collective.Tree,
		FaultAllReduceError: 0.1, FaultAllReduceScale: 0.1, FaultDropRank: true, FaultStale: true})
	in := randBufs(6, 4, 4*row) // 128 bytes > 64
	for k := 0; k < 2; k++ {
		x := cloneBufs(in)
		g.reduce(x, row)
		checkAll(t, "nccl tree", x, expect(collective.Tree, in, 4))
	}
	if s := g.Stats(); s.TreeCalls != 2 || s.RingCalls != 0 || s.CustomCalls != 0 || s.FaultedCalls != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestNewGroupRejectsBadOptions(t *testing.T) {
	w := model.Generate(tinyConfig(t))
	for want, o := range map[string]Options{
		"NCCL algorithm \"one_shot\"": {TP: 2, NCCLAlgorithm: collective.OneShot},
		"scale > -1":                  {TP: 2, FaultAllReduceScale: -1},
		"sizes >= 0":                  {TP: 2, FaultDropRankAbove: -1},
		"min batch >= 0":              {TP: 2, FaultMinBatch: -2},
	} {
		if _, err := NewGroup(w, nil, o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: error %v, want one mentioning %q", o, err, want)
		}
	}
}

// variantOf runs the one-shot variant v over a copy of in and returns every rank's result.
func variantOf(in [][]float32, bf16 bool, v collective.OneShotVariant) [][]float32 {
	b := cloneBufs(in)
	collective.AllReduceOneShot(b, bf16, v)
	return b
}

func TestFaultAccumulateBF16(t *testing.T) {
	for _, n := range []int{2, 4, 8} {
		g := reduceGroup(t, Options{TP: n, BF16: true, Custom: true, CustomMaxBytes: 1 << 20, FaultAccumulateBF16: true})
		in := randBufs(uint64(10+n), n, 64*row)
		b := cloneBufs(in)
		g.reduce(b, row)
		want := variantOf(in, true, collective.OneShotVariant{AccumulateBF16: true})[0]
		checkAll(t, "bf16 accumulation", b, want)
		good := variantOf(in, true, collective.OneShotVariant{})[0]
		differ := 0
		for i := range good {
			if good[i] != want[i] {
				differ++
			}
		}
		s := g.Stats()
		if n == 2 {
			if differ != 0 || s.FaultedCalls != 0 {
				t.Errorf("tp 2: one addition rounds once either way: %d elements differ, faulted %d", differ, s.FaultedCalls)
			}
			continue
		}
		if differ == 0 || s.FaultedCalls != 1 {
			t.Errorf("tp %d: %d elements differ from the float32 accumulator, faulted %d: expected a change, counted", n, differ, s.FaultedCalls)
		}
	}
	// NCCL calls are never faulted.
	g := reduceGroup(t, Options{TP: 4, BF16: true, FaultAccumulateBF16: true})
	in := randBufs(3, 4, 8*row)
	b := cloneBufs(in)
	g.reduce(b, row)
	r := cloneBufs(in)
	collective.AllReduceBF16(collective.Ring, r)
	checkAll(t, "nccl path", b, r[0])
}

func TestFaultRankOrder(t *testing.T) {
	g := reduceGroup(t, Options{TP: 4, Custom: true, CustomMaxBytes: 1 << 20, FaultRankOrder: true})
	in := randBufs(4, 4, 64*row)
	b := cloneBufs(in)
	g.reduce(b, row)
	want := variantOf(in, false, collective.OneShotVariant{Order: collective.OrderPerRank})
	disagree := 0
	for r := range b {
		for i := range b[r] {
			if math.Float32bits(b[r][i]) != math.Float32bits(want[r][i]) {
				t.Fatalf("rank %d element %d = %v, want %v", r, i, b[r][i], want[r][i])
			}
			if r > 0 && b[r][i] != b[0][i] {
				disagree++
			}
		}
	}
	if disagree == 0 || g.Stats().FaultedCalls != 1 {
		t.Errorf("float32 tp 4: %d rank disagreements, faulted %d: expected the ranks to disagree and the call counted", disagree, g.Stats().FaultedCalls)
	}
	// Rank 0 adds in the common order: its result is the correct kernel's.
	checkAll(t, "rank 0", b[:1], expect(collective.OneShot, in, 4))
}

func TestOracleOrders(t *testing.T) {
	for _, o := range []collective.SumOrder{collective.OrderForward, collective.OrderReverse} {
		g := reduceGroup(t, Options{TP: 4, Custom: true, CustomMaxBytes: 1 << 20, Oracle: &o})
		in := randBufs(5, 4, 16*row)
		b := cloneBufs(in)
		g.reduce(b, row)
		checkAll(t, "oracle", b, variantOf(in, false, collective.OneShotVariant{Order: o})[0])
		if s := g.Stats(); s.CustomCalls != 1 || s.FaultedCalls != 0 {
			t.Errorf("oracle %d: stats %+v", o, s)
		}
	}
	fwd := collective.OrderForward
	for name, opts := range map[string]Options{
		"oracle with a fault":          {TP: 4, Custom: true, Oracle: &fwd, FaultAllReduceError: 0.01},
		"oracle with rank order":       {TP: 4, Custom: true, Oracle: &fwd, FaultRankOrder: true},
		"bf16 accumulation, float32":   {TP: 4, Custom: true, FaultAccumulateBF16: true},
		"oracle with an unknown order": {TP: 4, Custom: true, Oracle: new(collective.SumOrder(collective.OrderPerRank))},
	} {
		opts.Interconnect = interconnect.Default(interconnect.NVLink)
		if _, err := NewGroup(model.Generate(tinyConfig(t)), nil, opts); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
