// Package collective implements the reference engine's allreduce algorithms over per-rank
// buffers: an NCCL-style ring (reduce-scatter then all-gather), an NCCL-style binary tree (reduce
// up a tree of pairs, then broadcast down) and a one-shot "custom" allreduce in which every rank
// reads every peer's staging buffer. They really move data through per-rank staging buffers and
// really differ in summation order, so their float results differ in the last bits while all are
// deterministic and leave every rank with the identical sum.
//
// Ranks are simulated in one goroutine, step by step: within a step every rank first "sends" (copies
// into the receiver's staging buffer) and then every rank "receives" (reduces or copies from its own
// staging buffer), which is exactly the data movement of the parallel algorithm.
//
// Precision: AllReduce accumulates in float32. AllReduceBF16 reproduces what bf16 kernels do (see
// its doc comment and docs/allreduce-probe.md).
package collective

import (
	"fmt"
	"sync"
)

// Algorithm names an allreduce algorithm.
type Algorithm string

const (
	// Ring is NCCL's ring allreduce: reduce-scatter then all-gather, 2(n-1) neighbour steps.
	Ring Algorithm = "ring"
	// OneShot is the custom allreduce: every rank reads every peer's buffer and sums in rank order.
	OneShot Algorithm = "one_shot"
	// Tree is NCCL's tree allreduce modelled as a binary tree over ranks: level 1 sums the pairs
	// (0,1), (2,3), ...; level 2 sums those pairs' results ((0,1)+(2,3), ...); and so on up to rank
	// 0, which then broadcasts the sum back down the tree. Each element takes ceil(log2 n)
	// additions in that order (an odd rank out at a level is carried up unchanged).
	Tree Algorithm = "tree"
)

// Algorithms lists the supported algorithms in a stable order.
var Algorithms = []Algorithm{Ring, OneShot, Tree}

// ParseAlgorithm turns a command-line name into an Algorithm. It accepts "ring", "one_shot"
// (also "one-shot" and "oneshot") and "tree".
func ParseAlgorithm(s string) (Algorithm, error) {
	switch s {
	case "ring":
		return Ring, nil
	case "one_shot", "one-shot", "oneshot":
		return OneShot, nil
	case "tree":
		return Tree, nil
	}
	return "", fmt.Errorf("unknown allreduce algorithm %q: expected %q, %q or %q", s, Ring, OneShot, Tree)
}

// RingChunkElems is the largest per-rank chunk, in elements, that one ring round moves. A buffer
// longer than n*RingChunkElems is processed in rounds of n chunks, as NCCL loops over its buffer in
// slices of nranks*chunkSize; which rank starts each element's sum depends on the element's position
// inside its round.
const RingChunkElems = 32 << 10

// precision selects how partial sums are rounded.
type precision int

const (
	f32  precision = iota // accumulate and store in float32
	bf16                  // values are bf16; see AllReduceBF16
)

// AllReduce sums bufs element-wise across ranks in place; bufs[r] is rank r's buffer (equal
// lengths); afterwards every rank holds the identical sum. Accumulation is in float32.
//
// Like a slice index out of range, an unknown algorithm or unequal buffer lengths are programming
// errors and panic; call Check first when the inputs come from outside the program.
func AllReduce(alg Algorithm, bufs [][]float32) {
	run(alg, bufs, f32)
}

// AllReduceBF16 is AllReduce for bf16 data held in float32 slices. The inputs are first rounded to
// bf16 (RoundBF16). Then, as the real kernels do:
//   - Ring: every partial sum that a rank forwards to its neighbour is stored as bf16, so each
//     reduction step computes in float32 and rounds the result to bf16 (NCCL reduces bf16 data in
//     float and writes bf16 back at every hop).
//   - Tree: every partial sum that crosses a tree level is stored as bf16: each pair is added in
//     float32 and the result rounded to bf16 before it moves up to the next level (about log2 n
//     roundings per element instead of the ring's n-1).
//   - OneShot: every rank upcasts the n peer values to float32, sums them in rank order 0..n-1 and
//     rounds once to bf16 at the end (vLLM/SGLang's custom allreduce accumulates packed bf16 in
//     float).
//
// Every rank ends holding identical bf16 values.
func AllReduceBF16(alg Algorithm, bufs [][]float32) {
	for _, b := range bufs {
		RoundBF16(b)
	}
	run(alg, bufs, bf16)
}

// Check reports whether AllReduce(alg, bufs) is well defined: a known algorithm, at least one
// rank, and buffers of equal length.
func Check(alg Algorithm, bufs [][]float32) error {
	if alg != Ring && alg != OneShot && alg != Tree {
		return fmt.Errorf("collective: unknown allreduce algorithm %q: expected %q, %q or %q", alg, Ring, OneShot, Tree)
	}
	if len(bufs) == 0 {
		return fmt.Errorf("collective: allreduce over zero ranks")
	}
	for r, b := range bufs {
		if len(b) != len(bufs[0]) {
			return fmt.Errorf("collective: rank %d buffer has %d elements, rank 0 has %d: all ranks must pass equal lengths", r, len(b), len(bufs[0]))
		}
	}
	return nil
}

func run(alg Algorithm, bufs [][]float32, p precision) {
	if err := Check(alg, bufs); err != nil {
		panic(err.Error())
	}
	n, l := len(bufs), len(bufs[0])
	if n == 1 || l == 0 {
		return
	}
	switch alg {
	case Ring:
		ring(bufs, n, l, p)
	case OneShot:
		oneShot(bufs, n, l, p)
	case Tree:
		tree(bufs, n, l, p)
	}
}

// workspace is a pooled set of per-rank staging buffers carved out of one slice.
type workspace struct{ data []float32 }

var pool = sync.Pool{New: func() any { return new(workspace) }}

// getStaging returns a pooled workspace holding n staging buffers of size elements each.
func getStaging(n, size int) *workspace {
	ws := pool.Get().(*workspace)
	need := n * size
	if cap(ws.data) < need {
		ws.data = make([]float32, need)
	}
	ws.data = ws.data[:need]
	return ws
}

// stagingOf returns rank r's staging buffer of size elements inside ws.
func (ws *workspace) stagingOf(r, size int) []float32 {
	return ws.data[r*size : (r+1)*size : (r+1)*size]
}

func putStaging(ws *workspace) { pool.Put(ws) }

// ring runs reduce-scatter then all-gather. Within a round of n chunks, chunk c's sum starts at
// rank c and accumulates x_c + x_{c+1} + ... + x_{c-1} (indices mod n); rank (c-1) mod n completes
// it and the all-gather passes the finished chunk around the ring.
func ring(bufs [][]float32, n, l int, p precision) {
	chunk := (l + n - 1) / n
	if chunk > RingChunkElems {
		chunk = RingChunkElems
	}
	ws := getStaging(n, chunk)
	defer putStaging(ws)

	for base := 0; base < l; base += n * chunk {
		blen := min(n*chunk, l-base)
		cs := (blen + n - 1) / n // per-rank chunk in this round
		bounds := func(c int) (int, int) {
			lo := base + c*cs
			hi := min(lo+cs, base+blen)
			if lo > hi {
				lo = hi
			}
			return lo, hi
		}
		// Reduce-scatter: at step s rank r sends chunk (r-s) mod n to rank r+1, which adds it to
		// its own copy of that chunk.
		for s := 0; s < n-1; s++ {
			for r := 0; r < n; r++ {
				lo, hi := bounds(mod(r-s, n))
				copy(ws.stagingOf((r+1)%n, chunk), bufs[r][lo:hi])
			}
			for r := 0; r < n; r++ {
				lo, hi := bounds(mod(r-1-s, n))
				dst := bufs[r][lo:hi]
				src := ws.stagingOf(r, chunk)[:hi-lo]
				if p == bf16 {
					addRoundBF16(dst, src)
				} else {
					add(dst, src)
				}
			}
		}
		// All-gather: at step s rank r forwards chunk (r+1-s) mod n, complete, to rank r+1.
		for s := 0; s < n-1; s++ {
			for r := 0; r < n; r++ {
				lo, hi := bounds(mod(r+1-s, n))
				copy(ws.stagingOf((r+1)%n, chunk), bufs[r][lo:hi])
			}
			for r := 0; r < n; r++ {
				lo, hi := bounds(mod(r-s, n))
				copy(bufs[r][lo:hi], ws.stagingOf(r, chunk)[:hi-lo])
			}
		}
	}
}

// tree reduces up a binary tree of ranks, then broadcasts down it. At level k (stride s = 2^(k-1))
// rank r with r mod 2s == 0 receives the partial sum of rank r+s (when that rank exists) into its
// staging buffer and adds it to its own: level 1 forms x0+x1, x2+x3, ...; level 2 forms
// (x0+x1)+(x2+x3), ...; rank 0 ends with the total. The broadcast then walks the levels back down,
// each receiver copying its parent's finished sum. In bf16 every level's sum is rounded to bf16,
// since that is what crosses the link to the next level.
func tree(bufs [][]float32, n, l int, p precision) {
	ws := getStaging(n, l)
	defer putStaging(ws)
	top := 1
	for top < n {
		top *= 2
	}
	for s := 1; s < n; s *= 2 {
		for r := 0; r+s < n; r += 2 * s {
			copy(ws.stagingOf(r, l), bufs[r+s]) // rank r+s sends its partial sum up to r
		}
		for r := 0; r+s < n; r += 2 * s {
			if p == bf16 {
				addRoundBF16(bufs[r], ws.stagingOf(r, l))
			} else {
				add(bufs[r], ws.stagingOf(r, l))
			}
		}
	}
	for s := top / 2; s >= 1; s /= 2 {
		for r := 0; r+s < n; r += 2 * s {
			copy(ws.stagingOf(r+s, l), bufs[r]) // parent r sends the total down to r+s
		}
		for r := 0; r+s < n; r += 2 * s {
			copy(bufs[r+s], ws.stagingOf(r+s, l))
		}
	}
}

// oneShot copies every rank's input into its staging (IPC) buffer, then every rank reads all n
// staging buffers and sums them in rank order 0..n-1 into its own output.
func oneShot(bufs [][]float32, n, l int, p precision) {
	ws := getStaging(n, l)
	defer putStaging(ws)
	for r := 0; r < n; r++ {
		copy(ws.stagingOf(r, l), bufs[r])
	}
	for r := 0; r < n; r++ {
		dst := bufs[r]
		sumRankOrder(dst, ws, n, l)
		if p == bf16 {
			RoundBF16(dst) // one rounding of the float32 accumulator
		}
	}
}

// sumRankOrder sets dst[i] = (((s0[i] + s1[i]) + s2[i]) + ...) + s{n-1}[i] over the n staging
// buffers in ws. Several peers are folded per pass (same order, fewer loads and stores of dst).
func sumRankOrder(dst []float32, ws *workspace, n, l int) {
	s := func(r int) []float32 { return ws.stagingOf(r, l) }
	var p int
	switch {
	case n >= 4:
		sum4(dst, s(0), s(1), s(2), s(3))
		p = 4
	case n == 3:
		copy(dst, s(0))
		add2(dst, s(1), s(2))
		p = 3
	default:
		copy(dst, s(0))
		p = 1
	}
	for ; n-p >= 4; p += 4 {
		add4(dst, s(p), s(p+1), s(p+2), s(p+3))
	}
	for ; n-p >= 2; p += 2 {
		add2(dst, s(p), s(p+1))
	}
	if p < n {
		add(dst, s(p))
	}
}

// sum4 sets dst[i] = ((a[i] + b[i]) + c[i]) + d[i].
func sum4(dst, a, b, c, d []float32) {
	a, b, c, d = a[:len(dst)], b[:len(dst)], c[:len(dst)], d[:len(dst)]
	for i := range dst {
		dst[i] = ((a[i] + b[i]) + c[i]) + d[i]
	}
}

// add4 sets dst[i] = (((dst[i] + a[i]) + b[i]) + c[i]) + d[i].
func add4(dst, a, b, c, d []float32) {
	a, b, c, d = a[:len(dst)], b[:len(dst)], c[:len(dst)], d[:len(dst)]
	for i := range dst {
		dst[i] = (((dst[i] + a[i]) + b[i]) + c[i]) + d[i]
	}
}

// add2 sets dst[i] = (dst[i] + a[i]) + b[i].
func add2(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = (dst[i] + a[i]) + b[i]
	}
}

func mod(a, n int) int {
	a %= n
	if a < 0 {
		a += n
	}
	return a
}

// add sets dst[i] += src[i]; len(src) must be >= len(dst).
func add(dst, src []float32) {
	src = src[:len(dst)]
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		d := dst[i : i+4 : i+4]
		s := src[i : i+4 : i+4]
		d[0] += s[0]
		d[1] += s[1]
		d[2] += s[2]
		d[3] += s[3]
	}
	for ; i < len(dst); i++ {
		dst[i] += src[i]
	}
}

// addRoundBF16 sets dst[i] = bf16(dst[i] + src[i]).
func addRoundBF16(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = roundBF16(dst[i] + src[i])
	}
}
