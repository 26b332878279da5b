package collective

import (
	"math"
	"math/rand/v2"
	"testing"
)

func variantBufs(seed uint64, n, l int) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 11))
	b := make([][]float32, n)
	for r := range b {
		b[r] = make([]float32, l)
		for i := range b[r] {
			b[r][i] = float32(rng.NormFloat64())
		}
	}
	return b
}

func cloneAll(b [][]float32) [][]float32 {
	out := make([][]float32, len(b))
	for r := range b {
		out[r] = append([]float32(nil), b[r]...)
	}
	return out
}

// exactRelErr is the RMS error of rank 0's result against the exact (float64) sum of the
// bf16-rounded inputs, relative to the RMS of that sum.
func exactRelErr(in [][]float32, got []float32) float64 {
	var se, ss float64
	for i := range got {
		var s float64
		for r := range in {
			s += float64(roundBF16(in[r][i]))
		}
		d := float64(got[i]) - s
		se += d * d
		ss += s * s
	}
	return math.Sqrt(se / ss)
}

// The default variant is the engine's one-shot, bit for bit, in both precisions.
func TestOneShotVariantDefaultIsOneShot(t *testing.T) {
	for _, bf := range []bool{false, true} {
		in := variantBufs(1, 8, 1000)
		a, b := cloneAll(in), cloneAll(in)
		if bf {
			AllReduceBF16(OneShot, a)
		} else {
			AllReduce(OneShot, a)
		}
		AllReduceOneShot(b, bf, OneShotVariant{})
		for r := range a {
			for i := range a[r] {
				if math.Float32bits(a[r][i]) != math.Float32bits(b[r][i]) {
					t.Fatalf("bf16=%v rank %d element %d: %v vs %v", bf, r, i, a[r][i], b[r][i])
				}
			}
		}
	}
}

// A bf16 accumulator errs more than the float32 one, the more so the more ranks; reversing a
// float32-accumulated sum of bf16 values changes (almost) nothing, since such sums are exact.
func TestOneShotVariantBF16Accumulation(t *testing.T) {
	prev := 0.0
	for _, n := range []int{2, 4, 8} {
		in := variantBufs(uint64(n), n, 1<<14)
		good, bad, rev := cloneAll(in), cloneAll(in), cloneAll(in)
		AllReduceOneShot(good, true, OneShotVariant{})
		AllReduceOneShot(bad, true, OneShotVariant{AccumulateBF16: true})
		AllReduceOneShot(rev, true, OneShotVariant{Order: OrderReverse})
		eg, eb, er := exactRelErr(in, good[0]), exactRelErr(in, bad[0]), exactRelErr(in, rev[0])
		t.Logf("tp %d: relative RMS error vs the exact sum: float32 accumulator %.3g, bf16 accumulator %.3g, reversed %.3g", n, eg, eb, er)
		if n == 2 {
			if eb != eg {
				t.Errorf("tp 2: one addition rounds once either way, got %.3g vs %.3g", eb, eg)
			}
		} else if !(eb > 1.4*eg) || !(eb > prev) {
			t.Errorf("tp %d: bf16 accumulation error %.3g, float32 %.3g (previous tp %.3g): expected well above and growing", n, eb, eg, prev)
		}
		if er != eg {
			t.Errorf("tp %d: reversed float32 accumulation %.3g vs forward %.3g: sums of bf16 values in float32 should be exact here", n, er, eg)
		}
		prev = eb
	}
}

// Per-rank order: in float32 the ranks disagree in the last bits (at more than two ranks); the
// forward and reverse orders leave every rank identical.
func TestOneShotVariantPerRankOrder(t *testing.T) {
	in := variantBufs(5, 4, 4096)
	b := cloneAll(in)
	AllReduceOneShot(b, false, OneShotVariant{Order: OrderPerRank})
	differ := 0
	for i := range b[0] {
		for r := 1; r < 4; r++ {
			if b[r][i] != b[0][i] {
				differ++
				break
			}
		}
	}
	if differ == 0 {
		t.Fatal("per-rank order at tp 4 float32: every rank identical, expected last-bit disagreements")
	}
	t.Logf("tp 4 float32 per-rank order: %d of %d elements differ between ranks", differ, len(b[0]))
	two := variantBufs(6, 2, 4096)
	c := cloneAll(two)
	AllReduceOneShot(c, false, OneShotVariant{Order: OrderPerRank})
	for i := range c[0] {
		if c[0][i] != c[1][i] {
			t.Fatalf("tp 2: a+b == b+a, ranks differ at %d", i)
		}
	}
	if err := (OneShotVariant{AccumulateBF16: true}).Check(false); err == nil {
		t.Error("a bf16 accumulator on float32 data was accepted")
	}
}
