package tp

import (
	"testing"
	"time"

	"github.com/reckon-ci/reckon/refengine/kvcache"
	"github.com/reckon-ci/reckon/refengine/model"
)

// BenchmarkDecodeStep measures one decode step of the default model (batch 32, context 128, tp 1,
// one core) and reports its float32 FLOP rate next to the machine's single-core matmul rate
// measured on the same shapes.
func BenchmarkDecodeStep(b *testing.B) {
	c := tinyConfig(b)
	w := model.Generate(c)
	const bs, ctx = 32, 128
	g, _ := newGroup(b, w, Options{TP: 1}, 0)
	g.ranks[0].workers = 1 // one core, to compare with the single-core matmul rate
	const ps = 16
	g.AttachKV(Target, bs*(ctx/ps+2), ps)
	al := kvcache.NewAllocator(bs*(ctx/ps+2), ps)
	seqs := make([]SeqInput, bs)
	for i := range seqs {
		pg, err := al.Grow(nil, ctx+1)
		if err != nil {
			b.Fatal(err)
		}
		toks := make([]int, ctx)
		for j := range toks {
			toks[j] = 32 + (i*7+j)%90
		}
		if _, err := g.Forward(Target, []SeqInput{{Tokens: toks, Pages: pg, Logits: LogitsNone}}); err != nil {
			b.Fatal(err)
		}
		seqs[i] = SeqInput{Tokens: []int{65}, Start: ctx, Pages: pg}
	}
	hd := c.HeadDim()
	matFlops := 2 * float64(bs) * float64(c.Layers) * float64(c.Hidden*(c.Heads+2*c.KVHeads)*hd+c.Heads*hd*c.Hidden+3*c.Hidden*c.FFN)
	matFlops += 2 * float64(bs) * float64(c.Hidden*c.Vocab)
	attFlops := 4 * float64(bs) * float64(c.Layers) * float64(c.Heads*hd) * float64(ctx+1)
	b.ResetTimer()
	t0 := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := g.Forward(Target, seqs); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(t0).Seconds()
	b.StopTimer()
	stepRate := (matFlops + attFlops) * float64(b.N) / el / 1e9
	// single-core matmul rate on the MLP up-projection shape
	x := make([]float32, bs*c.Hidden)
	wt := make([]float32, c.Hidden*2*c.FFN)
	out := make([]float32, bs*2*c.FFN)
	n := 0
	t1 := time.Now()
	for time.Since(t1) < 200*time.Millisecond {
		model.MatMul(out, x, wt, bs, c.Hidden, 2*c.FFN)
		n++
	}
	mmRate := 2 * float64(bs*c.Hidden*2*c.FFN) * float64(n) / time.Since(t1).Seconds() / 1e9
	b.ReportMetric(stepRate, "step_GFLOP/s")
	b.ReportMetric(mmRate, "matmul_GFLOP/s")
	b.ReportMetric(stepRate/mmRate, "step/matmul")
	b.ReportMetric(el/float64(b.N)*1e3, "ms/step")
}
