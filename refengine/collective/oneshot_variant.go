package collective

import "fmt"

// SumOrder is the order in which a one-shot allreduce adds the ranks' inputs.
type SumOrder int

const (
	// OrderForward adds rank 0, 1, ..., n-1 on every rank (vLLM's and SGLang's custom allreduce:
	// every rank reads the peers' buffers in the same order, so that all ranks hold bitwise
	// identical results).
	OrderForward SumOrder = iota
	// OrderReverse adds rank n-1, n-2, ..., 0 on every rank: a correct sum in another order.
	OrderReverse
	// OrderPerRank is a bug: rank r adds r, r+1, ..., r-1 (indices mod n), its own input first,
	// so the ranks' results may differ in the last bits.
	OrderPerRank
)

// OneShotVariant is a one-shot allreduce with a given summation order and accumulator. The
// default (OrderForward, float32 accumulation) computes exactly what AllReduce/AllReduceBF16 do
// with OneShot.
type OneShotVariant struct {
	Order SumOrder
	// AccumulateBF16, for bf16 data, rounds the running sum to bf16 after every addition (a
	// kernel that adds packed bf16 without upcasting it to float32): n-1 roundings per element
	// instead of one. It is meaningless for float32 data (Check rejects it there).
	AccumulateBF16 bool
}

// Check reports whether v can run on data of the given precision (bf16 true: bfloat16).
func (v OneShotVariant) Check(bf16Data bool) error {
	if v.Order < OrderForward || v.Order > OrderPerRank {
		return fmt.Errorf("collective: unknown one-shot summation order %d", v.Order)
	}
	if v.AccumulateBF16 && !bf16Data {
		return fmt.Errorf("collective: a bf16 accumulator needs bf16 data (float32 data accumulates in float32)")
	}
	return nil
}

// AllReduceOneShot sums bufs element-wise across ranks in place with the one-shot algorithm as
// v describes it: every rank copies its input into its staging buffer, then every rank reads all
// n staging buffers and adds them in v's order. With bf16Data the inputs are first rounded to
// bf16 and the result is rounded to bf16 once at the end (and after every addition with
// AccumulateBF16). With OrderPerRank the ranks may end with different values; with every other
// order they hold identical results. Like AllReduce it panics on inputs Check would reject.
func AllReduceOneShot(bufs [][]float32, bf16Data bool, v OneShotVariant) {
	if err := Check(OneShot, bufs); err != nil {
		panic(err.Error())
	}
	if err := v.Check(bf16Data); err != nil {
		panic(err.Error())
	}
	if bf16Data {
		for _, b := range bufs {
			RoundBF16(b)
		}
	}
	n, l := len(bufs), len(bufs[0])
	if n == 1 || l == 0 {
		return
	}
	if v == (OneShotVariant{}) {
		p := f32
		if bf16Data {
			p = bf16
		}
		oneShot(bufs, n, l, p)
		return
	}
	ws := getStaging(n, l)
	defer putStaging(ws)
	for r := 0; r < n; r++ {
		copy(ws.stagingOf(r, l), bufs[r])
	}
	for r := 0; r < n; r++ {
		dst := bufs[r]
		first := v.peer(r, 0, n)
		copy(dst, ws.stagingOf(first, l))
		for k := 1; k < n; k++ {
			src := ws.stagingOf(v.peer(r, k, n), l)
			if v.AccumulateBF16 {
				addRoundBF16(dst, src)
			} else {
				add(dst, src)
			}
		}
		if bf16Data {
			RoundBF16(dst) // the one rounding of the float32 accumulator (a no-op after bf16 adds)
		}
	}
}

// peer is the k-th rank that rank r adds.
func (v OneShotVariant) peer(r, k, n int) int {
	switch v.Order {
	case OrderReverse:
		return n - 1 - k
	case OrderPerRank:
		return (r + k) % n
	}
	return k
}
