package collective

import (
	"math"
	"math/rand/v2"
	"testing"
)

// treeOrderSum sums element i of in in the binary tree's order, written independently of the
// implementation: recursively, the sum of ranks [lo, lo+2^k) is the sum of its two halves, and an
// odd rank out is carried up unchanged. With bf each pairwise sum is rounded to bf16.
func treeOrderSum(in [][]float32, i int, bf bool) float32 {
	var sum func(lo, size int) float32
	sum = func(lo, size int) float32 {
		if size == 1 {
			return in[lo][i]
		}
		half := size / 2
		a := sum(lo, half)
		if lo+half >= len(in) {
			return a // the right subtree is empty: nothing to add at this level
		}
		s := a + sum(lo+half, half)
		if bf {
			s = roundBF16(s)
		}
		return s
	}
	top := 1
	for top < len(in) {
		top *= 2
	}
	return sum(0, top)
}

func TestTreeSumsInTreeOrder(t *testing.T) {
	for _, bf := range []bool{false, true} {
		for _, tc := range []struct{ n, l int }{{1, 5}, {2, 7}, {3, 10}, {4, 4096}, {5, 33}, {6, 9}, {7, 100}, {8, 1001}, {11, 64}, {16, 50}} {
			in := makeBufs(uint64(tc.n*7919+tc.l), tc.n, tc.l)
			if bf {
				for _, b := range in {
					RoundBF16(b)
				}
			}
			got := clone(in)
			if bf {
				AllReduceBF16(Tree, got)
			} else {
				AllReduce(Tree, got)
			}
			if r, i := ranksIdentical(got); r >= 0 {
				t.Fatalf("bf16=%v n=%d l=%d: rank %d element %d differs from rank 0", bf, tc.n, tc.l, r, i)
			}
			for i := 0; i < tc.l; i++ {
				if want := treeOrderSum(in, i, bf); math.Float32bits(got[0][i]) != math.Float32bits(want) {
					t.Fatalf("bf16=%v n=%d l=%d element %d: tree gave %v, tree-order sum is %v", bf, tc.n, tc.l, i, got[0][i], want)
				}
			}
		}
	}
}

// TestTreeOrderIsNotRankOrder: the reference above really is a different order from one-shot's
// rank order (x0+x1)+(x2+x3) vs ((x0+x1)+x2)+x3, shown on values where the two round
// differently, so the tests that use it can fail.
func TestTreeOrderIsNotRankOrder(t *testing.T) {
	in := [][]float32{{1}, {0x1p-24}, {0x1p-24}, {0x1p-24}}
	tree, one := clone(in), clone(in)
	AllReduce(Tree, tree)
	AllReduce(OneShot, one)
	// tree: (1 + 2^-24) + (2^-23) = 1 + 2^-23 (the first pair rounds to 1, ties to even);
	// one-shot: ((1 + 2^-24) + 2^-24) + 2^-24 = 1 (every step rounds back to 1).
	if tree[0][0] != 1+0x1p-23 || one[0][0] != 1 {
		t.Fatalf("tree %v (want %v), one-shot %v (want 1)", tree[0][0], float32(1+0x1p-23), one[0][0])
	}
}

// wideInputs returns n rank buffers of bf16 values randn × 2^U(-20, 20): the exponent spread
// that makes summation order visible in bf16 (the contract's random bf16 inputs).
func wideInputs(seed uint64, n, l int) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 99))
	in := make([][]float32, n)
	for r := range in {
		in[r] = make([]float32, l)
		for i := range in[r] {
			in[r][i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(41)-20))
		}
		RoundBF16(in[r])
	}
	return in
}

// TestTreeTwoRanksIdentical: on two ranks there is one sum, a+b == b+a, so tree, ring and
// one-shot agree bit for bit, in float32 and bf16.
func TestTreeTwoRanksIdentical(t *testing.T) {
	in := wideInputs(5, 2, 8192)
	for _, bf := range []bool{false, true} {
		outs := map[Algorithm][][]float32{}
		for _, alg := range Algorithms {
			b := clone(in)
			if bf {
				AllReduceBF16(alg, b)
			} else {
				AllReduce(alg, b)
			}
			outs[alg] = b
		}
		for _, alg := range []Algorithm{Ring, OneShot} {
			for i := range in[0] {
				if math.Float32bits(outs[Tree][0][i]) != math.Float32bits(outs[alg][0][i]) {
					t.Fatalf("bf16=%v tp 2: tree and %s differ at element %d: %v vs %v", bf, alg, i, outs[Tree][0][i], outs[alg][0][i])
				}
			}
		}
	}
}

// TestTreeDiffersInLastBitsAtTP4And8: at tp 4 and 8 in bf16 the tree's order (log2 n bf16
// roundings) differs from the ring's (n-1 roundings) and from one-shot's (one rounding of a
// float32 sum) in the last bits of some elements, while all three stay within the rounding bound
// of the float64 sum: gamma_{n-1} (u = 2^-8) of the sum of magnitudes for ring and one-shot, and
// the tighter gamma_{ceil(log2 n)} for the tree.
func TestTreeDiffersInLastBitsAtTP4And8(t *testing.T) {
	const l = 1 << 15
	u := math.Ldexp(1, -8)
	gamma := func(k int) float64 { return float64(k) * u / (1 - float64(k)*u) }
	for _, n := range []int{4, 8} {
		in := wideInputs(uint64(n), n, l)
		ref, mag := make([]float64, l), make([]float64, l)
		for r := range in {
			for i, v := range in[r] {
				ref[i] += float64(v)
				mag[i] += math.Abs(float64(v))
			}
		}
		outs := map[Algorithm][]float32{}
		for _, alg := range Algorithms {
			b := clone(in)
			AllReduceBF16(alg, b)
			if r, i := ranksIdentical(b); r >= 0 {
				t.Fatalf("tp %d %s: rank %d element %d differs from rank 0", n, alg, r, i)
			}
			outs[alg] = b[0]
			depth := int(math.Ceil(math.Log2(float64(n))))
			bound := gamma(n - 1)
			if alg == Tree {
				bound = gamma(depth)
			}
			var worst float64
			for i, v := range b[0] {
				worst = max(worst, relErr(math.Abs(float64(v)-ref[i]), mag[i]))
			}
			t.Logf("tp %d bf16 %s: max |x - float64 sum| / sum|addends| = %.3g (bound %.3g)", n, alg, worst, bound)
			if worst > bound {
				t.Errorf("tp %d bf16 %s: max relative error %.3g above the rounding bound %.3g", n, alg, worst, bound)
			}
		}
		for _, other := range []Algorithm{Ring, OneShot} {
			diff, last := 0, 0
			var worst float64
			for i := range outs[Tree] {
				a, b := outs[Tree][i], outs[other][i]
				if math.Float32bits(a) != math.Float32bits(b) {
					diff++
					if bf16ULPs(a, b) == 1 {
						last++
					}
					worst = max(worst, relErr(math.Abs(float64(a)-float64(b)), mag[i]))
				}
			}
			t.Logf("tp %d bf16: tree vs %s differ in %d of %d elements (%.1f%%; %d of them by one bf16 ulp); max |diff| / sum|addends| = %.3g = %.2f u",
				n, other, diff, l, 100*float64(diff)/l, last, worst, worst/u)
			if diff == 0 || last == 0 {
				t.Errorf("tp %d bf16: tree and %s differ in %d elements (%d by one ulp): their summation orders should differ in the last bits", n, other, diff, last)
			}
			if worst > 2*gamma(n-1) {
				t.Errorf("tp %d bf16: tree and %s differ by %.3g of the addends' magnitude, beyond two rounding bounds", n, other, worst)
			}
		}
	}
}

// TestTreeFloat32DiffersAtTP4: in float32 too, the tree's order is its own.
func TestTreeFloat32DiffersAtTP4(t *testing.T) {
	in := makeBufs(77, 4, 4096)
	tree, one, ring := clone(in), clone(in), clone(in)
	AllReduce(Tree, tree)
	AllReduce(OneShot, one)
	AllReduce(Ring, ring)
	dOne, dRing := 0, 0
	for i := range tree[0] {
		if tree[0][i] != one[0][i] {
			dOne++
		}
		if tree[0][i] != ring[0][i] {
			dRing++
		}
		if d := math.Abs(float64(tree[0][i] - one[0][i])); d > 1e-5 {
			t.Fatalf("element %d: tree %v and one-shot %v differ by %g, more than rounding", i, tree[0][i], one[0][i], d)
		}
	}
	if dOne == 0 || dRing == 0 {
		t.Errorf("float32 tp 4: tree differs from one-shot in %d and from ring in %d elements; want both > 0", dOne, dRing)
	}
}

// bf16ULPs is the distance between two bf16 values of the same sign in units in the last place.
func bf16ULPs(a, b float32) int {
	ka, kb := int64(math.Float32bits(a)>>16), int64(math.Float32bits(b)>>16)
	if (ka^kb)&0x8000 != 0 {
		return 1 << 16 // different signs: count as far apart
	}
	d := ka - kb
	if d < 0 {
		d = -d
	}
	return int(d)
}

func BenchmarkAllReduceBF16(b *testing.B) {
	in := wideInputs(1, 8, 64*128) // 64 tokens of hidden 128 on 8 ranks
	work := clone(in)
	for _, alg := range Algorithms {
		b.Run(string(alg), func(b *testing.B) {
			for b.Loop() {
				for r := range work {
					copy(work[r], in[r])
				}
				AllReduceBF16(alg, work)
			}
		})
	}
}
