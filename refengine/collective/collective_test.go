package collective

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// makeBufs returns n rank buffers of l elements from a seeded normal distribution.
func makeBufs(seed uint64, n, l int) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	bufs := make([][]float32, n)
	for r := range bufs {
		bufs[r] = make([]float32, l)
		for i := range bufs[r] {
			bufs[r][i] = float32(rng.NormFloat64())
		}
	}
	return bufs
}

func clone(bufs [][]float32) [][]float32 {
	out := make([][]float32, len(bufs))
	for r := range bufs {
		out[r] = append([]float32(nil), bufs[r]...)
	}
	return out
}

// ranksIdentical returns the first (rank, index) whose bits differ from rank 0, or -1, -1.
func ranksIdentical(bufs [][]float32) (int, int) {
	for r := 1; r < len(bufs); r++ {
		for i := range bufs[r] {
			if math.Float32bits(bufs[r][i]) != math.Float32bits(bufs[0][i]) {
				return r, i
			}
		}
	}
	return -1, -1
}

// ringOrderSum sums element i of in in the ring's order for n ranks, chunk elements per rank:
// starting at the rank that owns i's chunk within its round, then the following ranks.
func ringOrderSum(in [][]float32, i, l int, bf bool) float32 {
	n := len(in)
	chunk := min((l+n-1)/n, RingChunkElems)
	base := (i / (n * chunk)) * (n * chunk)
	blen := min(n*chunk, l-base)
	cs := (blen + n - 1) / n
	c := (i - base) / cs
	acc := in[c][i]
	for k := 1; k < n; k++ {
		acc += in[(c+k)%n][i]
		if bf {
			acc = roundBF16(acc)
		}
	}
	return acc
}

func TestRingSumsInRingOrder(t *testing.T) {
	for _, tc := range []struct{ n, l int }{{2, 1}, {2, 7}, {3, 10}, {4, 4096}, {8, 1000}, {8, 8*RingChunkElems + 13}, {5, 3}} {
		in := makeBufs(uint64(tc.n*100000+tc.l), tc.n, tc.l)
		got := clone(in)
		AllReduce(Ring, got)
		if r, i := ranksIdentical(got); r >= 0 {
			t.Fatalf("n=%d l=%d: rank %d element %d differs from rank 0", tc.n, tc.l, r, i)
		}
		for i := 0; i < tc.l; i++ {
			if want := ringOrderSum(in, i, tc.l, false); math.Float32bits(got[0][i]) != math.Float32bits(want) {
				t.Fatalf("n=%d l=%d element %d: ring gave %v, ring-order sum is %v", tc.n, tc.l, i, got[0][i], want)
			}
		}
	}
}

func TestOneShotSumsInRankOrder(t *testing.T) {
	for _, tc := range []struct{ n, l int }{{2, 5}, {3, 17}, {4, 4096}, {5, 9}, {6, 33}, {7, 100}, {8, 1001}, {11, 64}} {
		in := makeBufs(uint64(tc.n*31+tc.l), tc.n, tc.l)
		got := clone(in)
		AllReduce(OneShot, got)
		if r, i := ranksIdentical(got); r >= 0 {
			t.Fatalf("n=%d: rank %d element %d differs from rank 0", tc.n, r, i)
		}
		for i := 0; i < tc.l; i++ {
			want := in[0][i]
			for r := 1; r < tc.n; r++ {
				want += in[r][i]
			}
			if math.Float32bits(got[0][i]) != math.Float32bits(want) {
				t.Fatalf("n=%d element %d: one-shot gave %v, rank-order sum is %v", tc.n, i, got[0][i], want)
			}
		}
	}
}

// TestOrdersDiffer is the point of having two algorithms: on random data their float sums
// differ in the last bits, while on small integers both are exact.
func TestOrdersDiffer(t *testing.T) {
	in := makeBufs(42, 8, 4096)
	a, b := clone(in), clone(in)
	AllReduce(Ring, a)
	AllReduce(OneShot, b)
	diff := 0
	for i := range a[0] {
		if a[0][i] != b[0][i] {
			diff++
		}
		if d := math.Abs(float64(a[0][i] - b[0][i])); d > 1e-5 {
			t.Fatalf("element %d: ring %v and one-shot %v differ by %g, more than rounding", i, a[0][i], b[0][i], d)
		}
	}
	if diff == 0 {
		t.Fatal("ring and one-shot gave bit-identical sums on random data: summation orders do not differ")
	}

	ints := make([][]float32, 8)
	for r := range ints {
		ints[r] = make([]float32, 999)
		for i := range ints[r] {
			ints[r][i] = float32((r*37+i*11)%61 - 30)
		}
	}
	for _, alg := range Algorithms {
		got := clone(ints)
		AllReduce(alg, got)
		for i := range got[0] {
			var want float32
			for r := range ints {
				want += ints[r][i]
			}
			if got[0][i] != want {
				t.Fatalf("%s on integers: element %d = %v, want exactly %v", alg, i, got[0][i], want)
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	in := makeBufs(3, 4, 3000)
	for _, alg := range Algorithms {
		a, b := clone(in), clone(in)
		AllReduce(alg, a)
		AllReduce(alg, b)
		for i := range a[0] {
			if math.Float32bits(a[0][i]) != math.Float32bits(b[0][i]) {
				t.Fatalf("%s: two runs differ at element %d", alg, i)
			}
		}
	}
}

func TestSingleRankAndEmpty(t *testing.T) {
	for _, alg := range Algorithms {
		one := [][]float32{{1, 2, 3}}
		AllReduce(alg, one)
		if one[0][0] != 1 || one[0][2] != 3 {
			t.Fatalf("%s on one rank changed the buffer: %v", alg, one[0])
		}
		AllReduce(alg, [][]float32{{}, {}})
	}
}

func TestCheckRejectsBadInput(t *testing.T) {
	if err := Check(Ring, [][]float32{{1, 2}, {1}}); err == nil || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("unequal lengths: got %v, want an error naming rank 1", err)
	}
	if err := Check("nvls", [][]float32{{1}}); err == nil {
		t.Fatal("unknown algorithm accepted")
	}
	if err := Check(Ring, nil); err == nil {
		t.Fatal("zero ranks accepted")
	}
	if err := Check(OneShot, [][]float32{{1}, {2}}); err != nil {
		t.Fatalf("good input rejected: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("AllReduce with unequal lengths did not panic")
		}
	}()
	AllReduce(Ring, [][]float32{{1, 2}, {1}})
}

func TestParseAlgorithm(t *testing.T) {
	for in, want := range map[string]Algorithm{"ring": Ring, "one_shot": OneShot, "one-shot": OneShot, "tree": Tree} {
		if got, err := ParseAlgorithm(in); err != nil || got != want {
			t.Fatalf("ParseAlgorithm(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseAlgorithm("nccl"); err == nil {
		t.Fatal(`ParseAlgorithm("nccl") accepted`)
	}
}

func TestAllReduceBF16(t *testing.T) {
	in := makeBufs(9, 8, 2048)
	for _, alg := range Algorithms {
		got := clone(in)
		AllReduceBF16(alg, got)
		if r, i := ranksIdentical(got); r >= 0 {
			t.Fatalf("%s bf16: rank %d element %d differs", alg, r, i)
		}
		rounded := clone(in)
		for _, b := range rounded {
			RoundBF16(b)
		}
		for i := range got[0] {
			if v := got[0][i]; roundBF16(v) != v {
				t.Fatalf("%s bf16: element %d = %v is not a bf16 value", alg, i, v)
			}
			var want float32
			if alg == Ring {
				want = ringOrderSum(rounded, i, 2048, true)
			} else if alg == Tree {
				want = treeOrderSum(rounded, i, true)
			} else {
				for r := range rounded {
					want += rounded[r][i]
				}
				want = roundBF16(want)
			}
			if math.Float32bits(got[0][i]) != math.Float32bits(want) {
				t.Fatalf("%s bf16 element %d: got %v want %v", alg, i, got[0][i], want)
			}
		}
	}
}

func TestRoundBF16(t *testing.T) {
	nan := math.Float32frombits(0x7f800001) // signalling NaN whose payload is all in the low bits
	cases := []struct{ in, want float32 }{
		{1, 1},
		{math.Float32frombits(0x3f808000), math.Float32frombits(0x3f800000)}, // tie, even below
		{math.Float32frombits(0x3f818000), math.Float32frombits(0x3f820000)}, // tie, even above
		{math.Float32frombits(0x3f808001), math.Float32frombits(0x3f810000)}, // just above tie
		{math.Float32frombits(0x3f807fff), math.Float32frombits(0x3f800000)}, // just below tie
		{float32(math.Inf(1)), float32(math.Inf(1))},
		{float32(math.Inf(-1)), float32(math.Inf(-1))},
		{math.MaxFloat32, float32(math.Inf(1))},
		{math.Float32frombits(0x80000001), math.Float32frombits(0x80000000)}, // tiny negative -> -0
	}
	x := make([]float32, len(cases))
	for i, c := range cases {
		x[i] = c.in
	}
	RoundBF16(x)
	for i, c := range cases {
		if math.Float32bits(x[i]) != math.Float32bits(c.want) {
			t.Errorf("RoundBF16(%#08x) = %#08x, want %#08x", math.Float32bits(c.in), math.Float32bits(x[i]), math.Float32bits(c.want))
		}
	}
	y := []float32{nan, -nan}
	RoundBF16(y)
	if !math.IsNaN(float64(y[0])) || !math.IsNaN(float64(y[1])) {
		t.Fatalf("NaN not preserved: %v", y)
	}
	if math.Float32bits(y[1])>>31 != 1 {
		t.Fatal("sign of NaN lost")
	}
}

func TestBF16FromFloat64AvoidsDoubleRounding(t *testing.T) {
	// 1 + 2^-8 + 2^-30 is just above the bf16 midpoint between 1 and 1+2^-7; float32 rounds it
	// onto the midpoint, after which a tie-to-even would go down to 1. Direct rounding goes up.
	x := 1 + math.Ldexp(1, -8) + math.Ldexp(1, -30)
	if got, want := BF16FromFloat64(x), float32(1+math.Ldexp(1, -7)); got != want {
		t.Fatalf("BF16FromFloat64(%v) = %v, want %v", x, got, want)
	}
	y := 1 + math.Ldexp(1, -8) - math.Ldexp(1, -30)
	if got := BF16FromFloat64(y); got != 1 {
		t.Fatalf("BF16FromFloat64(%v) = %v, want 1", y, got)
	}
	if got := BF16FromFloat64(-3.0); got != -3 {
		t.Fatalf("BF16FromFloat64(-3) = %v", got)
	}
}

func TestNoAllocationsPerCall(t *testing.T) {
	in := makeBufs(1, 4, 128*16)
	for _, alg := range Algorithms {
		AllReduce(alg, in) // warm the pool
		if a := testing.AllocsPerRun(20, func() { AllReduce(alg, in) }); a > 0 {
			t.Errorf("%s: %v allocations per call, want 0", alg, a)
		}
	}
}

func BenchmarkAllReduce(b *testing.B) {
	for _, alg := range Algorithms {
		for _, tc := range []struct {
			name string
			n, l int
		}{{"tp8_decode32", 8, 128 * 32}, {"tp8_prefill4k", 8, 128 * 4096}, {"tp2_decode1", 2, 128}} {
			b.Run(string(alg)+"/"+tc.name, func(b *testing.B) {
				bufs := makeBufs(1, tc.n, tc.l)
				b.SetBytes(int64(tc.l * 4))
				b.ReportAllocs()
				for b.Loop() {
					AllReduce(alg, bufs)
				}
			})
		}
	}
}

// TestConcurrentCalls: the engine may run several allreduces at once (one per TP group or layer
// pipeline); pooled staging must not be shared between calls.
func TestConcurrentCalls(t *testing.T) {
	in := makeBufs(5, 4, 3000)
	want := map[Algorithm][][]float32{}
	for _, alg := range Algorithms {
		w := clone(in)
		AllReduce(alg, w)
		want[alg] = w
	}
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			alg := Algorithms[g%2]
			for k := 0; k < 20; k++ {
				got := clone(in)
				AllReduce(alg, got)
				for i := range got[0] {
					if got[0][i] != want[alg][0][i] {
						errs <- fmt.Sprintf("%s goroutine %d: element %d = %v, want %v", alg, g, i, got[0][i], want[alg][0][i])
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
