package tp

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/reckon-ci/reckon/refengine/collective"
	"github.com/reckon-ci/reckon/refengine/interconnect"
	"github.com/reckon-ci/reckon/refengine/kvcache"
	"github.com/reckon-ci/reckon/refengine/model"
)

func tinyConfig(t testing.TB) model.Config {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "fixtures", "models", "tiny.json")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("model fixture: %v", err)
	}
	c, err := model.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newGroup builds a group with a KV store and one sequence's pages for n tokens.
func newGroup(t testing.TB, w *model.Weights, opts Options, n int) (*Group, []int32) {
	t.Helper()
	if opts.Interconnect.Topology == "" {
		opts.Interconnect = interconnect.Default(interconnect.NVLink)
	}
	if opts.CustomMaxBytes == 0 {
		opts.CustomMaxBytes = 1 << 30
	}
	g, err := NewGroup(w, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	const ps = 16
	pages := (n + ps - 1) / ps
	g.AttachKV(Target, pages+4, ps)
	a := kvcache.NewAllocator(pages+4, ps)
	pg, err := a.Grow(nil, n)
	if err != nil {
		t.Fatal(err)
	}
	return g, pg
}

func maxRelErr(got [][]float32, want [][]float64) float64 {
	var num, den float64
	for i := range want {
		for j := range want[i] {
			num = math.Max(num, math.Abs(float64(got[i][j])-want[i][j]))
			den = math.Max(den, math.Abs(want[i][j]))
		}
	}
	return num / den
}

// TestShardedLogitsMatchFloat64Reference checks tp 1/2/4/8 (custom and ring) against the unsharded
// float64 forward, with the prompt processed in two chunks so the KV cache is exercised.
func TestShardedLogitsMatchFloat64Reference(t *testing.T) {
	c := tinyConfig(t)
	w := model.Generate(c)
	prompt := model.Encode("The quick brown fox jumps over the lazy dog, again and again.")
	ref := model.ReferenceForward(w, prompt)
	for _, tpn := range []int{1, 2, 4, 8} {
		for _, custom := range []bool{true, false} {
			g, pages := newGroup(t, w, Options{TP: tpn, Custom: custom}, len(prompt))
			k := 23
			a, err := g.Forward(Target, []SeqInput{{Tokens: prompt[:k], Start: 0, Pages: pages, Logits: LogitsAll}})
			if err != nil {
				t.Fatal(err)
			}
			b, err := g.Forward(Target, []SeqInput{{Tokens: prompt[k:], Start: k, Pages: pages, Logits: LogitsAll}})
			if err != nil {
				t.Fatal(err)
			}
			got := append(a, b...)
			e := maxRelErr(got, ref)
			t.Logf("tp=%d custom=%v: max |logit - float64 ref| / max|ref| = %.3g", tpn, custom, e)
			if e > 1e-5 {
				t.Errorf("tp=%d custom=%v: relative error %.3g exceeds 1e-5", tpn, custom, e)
			}
		}
	}
}

// TestFaultAllReduceErrorIsVisible shows the logit check failing when the custom allreduce is
// corrupted.
func TestFaultAllReduceErrorIsVisible(t *testing.T) {
	c := tinyConfig(t)
	w := model.Generate(c)
	prompt := model.Encode("fault injection")
	ref := model.ReferenceForward(w, prompt)
	g, pages := newGroup(t, w, Options{TP: 4, Custom: true, FaultAllReduceError: 0.05}, len(prompt))
	got, err := g.Forward(Target, []SeqInput{{Tokens: prompt, Pages: pages, Logits: LogitsAll}})
	if err != nil {
		t.Fatal(err)
	}
	if e := maxRelErr(got, ref); e < 1e-3 {
		t.Errorf("with a 5%% allreduce fault the relative error is only %.3g", e)
	}
	if s := g.Stats(); s.CustomCalls == 0 || s.RingCalls != 0 {
		t.Errorf("stats %+v: expected only custom allreduces", s)
	}
	_ = collective.Ring
}

func logitsFor(t *testing.T, w *model.Weights, opts Options, prompt []int) [][]float32 {
	t.Helper()
	g, pages := newGroup(t, w, opts, len(prompt))
	out, err := g.Forward(Target, []SeqInput{{Tokens: prompt, Pages: pages, Logits: LogitsAll}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func maxDiff(a, b [][]float32) (abs, rel float64) {
	var den float64
	for i := range a {
		for j := range a[i] {
			abs = math.Max(abs, math.Abs(float64(a[i][j])-float64(b[i][j])))
			den = math.Max(den, math.Abs(float64(b[i][j])))
		}
	}
	return abs, abs / den
}

// TestRingVsOneShotRoundingLevel: the two algorithms sum in different orders, so the logits
// differ, but only at rounding level (float32: ~1e-7 relative; bf16: the bf16 step).
func TestRingVsOneShotRoundingLevel(t *testing.T) {
	c := tinyConfig(t)
	w := model.Generate(c)
	prompt := model.Encode("Ring and one-shot allreduce sum in different orders; how far apart are the logits?")
	ref := model.ReferenceForward(w, prompt)
	for _, bf16 := range []bool{false, true} {
		for _, tpn := range []int{2, 4, 8} {
			ring := logitsFor(t, w, Options{TP: tpn, BF16: bf16}, prompt)
			one := logitsFor(t, w, Options{TP: tpn, BF16: bf16, Custom: true}, prompt)
			abs, rel := maxDiff(ring, one)
			eRing, eOne := maxRelErr(ring, ref), maxRelErr(one, ref)
			t.Logf("bf16=%v tp=%d: ring vs one-shot max abs %.3g rel %.3g; vs float64 ref: ring %.3g one-shot %.3g", bf16, tpn, abs, rel, eRing, eOne)
			limit := 1e-5
			if bf16 {
				limit = 0.05
			}
			if rel > limit || eRing > limit || eOne > limit {
				t.Errorf("bf16=%v tp=%d: differences beyond rounding level (limit %g)", bf16, tpn, limit)
			}
			if tpn > 2 && abs == 0 {
				t.Errorf("bf16=%v tp=%d: ring and one-shot gave bit-identical logits; their summation orders should differ", bf16, tpn)
			}
		}
	}
}

// TestDeterministicAllReduceIsBatchInvariant: a sequence's logits do not depend on the other
// sequences of the batch when the allreduce runs row by row; one-shot is batch-invariant anyway.
func TestDeterministicAllReduceIsBatchInvariant(t *testing.T) {
	c := tinyConfig(t)
	w := model.Generate(c)
	a := model.Encode("first sequence of the batch")
	b := model.Encode("a second, longer sequence that shares the batch with the first one")
	for _, opts := range []Options{{TP: 4, Deterministic: true}, {TP: 4, Custom: true}, {TP: 4}} {
		alone := logitsFor(t, w, opts, a)
		g, _ := newGroup(t, w, opts, 0)
		al := kvcache.NewAllocator(64, 16)
		pa, _ := al.Grow(nil, len(a))
		pb, _ := al.Grow(nil, len(b))
		g.AttachKV(Target, 64, 16)
		both, err := g.Forward(Target, []SeqInput{{Tokens: b, Pages: pb, Logits: LogitsNone}, {Tokens: a, Pages: pa, Logits: LogitsAll}})
		if err != nil {
			t.Fatal(err)
		}
		abs, rel := maxDiff(alone, both)
		if !opts.Custom && !opts.Deterministic {
			// plain ring: chunk boundaries move with the batch size, so the summation order of an
			// element depends on the batch: rounding-level differences are expected
			t.Logf("ring, batched vs alone: max abs logit difference %.3g (rel %.3g)", abs, rel)
			if rel > 1e-5 {
				t.Errorf("ring: batch composition changed logits by %.3g relative, beyond rounding", rel)
			}
			continue
		}
		if abs != 0 {
			t.Errorf("opts %+v: logits changed by %.3g when batched with another sequence", opts, abs)
		}
	}
}

func TestForwardRejectsBadInput(t *testing.T) {
	c := tinyConfig(t)
	w := model.Generate(c)
	g, pages := newGroup(t, w, Options{TP: 2}, 8)
	for name, in := range map[string]SeqInput{
		"empty":      {Pages: pages},
		"bad token":  {Tokens: []int{1, 999}, Pages: pages},
		"few pages":  {Tokens: make([]int, 40), Pages: pages[:1]},
		"beyond max": {Tokens: []int{1}, Start: c.MaxPositions, Pages: pages},
	} {
		if _, err := g.Forward(Target, []SeqInput{in}); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// TestWorkersDoNotChangeResults: splitting a rank's rows among goroutines leaves every logit
// bit-identical.
func TestWorkersDoNotChangeResults(t *testing.T) {
	c := tinyConfig(t)
	w := model.Generate(c)
	prompt := model.Encode("The same batch computed by one worker and by three workers per rank.")
	var outs [][][]float32
	for _, workers := range []int{1, 3} {
		g, pages := newGroup(t, w, Options{TP: 1}, len(prompt))
		for _, rk := range g.ranks {
			rk.workers = workers
			rk.sc = make([][]float32, workers)
		}
		out, err := g.Forward(Target, []SeqInput{{Tokens: prompt, Pages: pages, Logits: LogitsAll}})
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
	}
	if abs, _ := maxDiff(outs[0], outs[1]); abs != 0 {
		t.Errorf("1 vs 3 workers: logits differ by %.3g", abs)
	}
}

// TestAllReduceHook: an installed hook sees every allreduce call with the algorithm that ran
// (custom, or NCCL for a tensor above the custom buffer), and none once removed.
func TestAllReduceHook(t *testing.T) {
	cfg := model.Config{Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 258, MaxPositions: 256, RopeTheta: 10000, NormEps: 1e-5, Seed: 3}
	g, err := NewGroup(model.Generate(cfg), nil, Options{TP: 2, Custom: true, CustomMaxBytes: 4 * 64 * 4})
	if err != nil {
		t.Fatal(err)
	}
	g.AttachKV(Target, 8, 16)
	var recs []AllReduceRecord
	g.SetAllReduceHook(func(r AllReduceRecord) { recs = append(recs, r) })
	pages := []int32{0, 1, 2, 3}
	if _, err := g.Forward(Target, []SeqInput{{Tokens: []int{1, 2, 3, 4, 5, 6}, Pages: pages}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Forward(Target, []SeqInput{{Tokens: []int{7}, Start: 6, Pages: pages}}); err != nil {
		t.Fatal(err)
	}
	st := g.Stats()
	if len(recs) != 8 || int64(len(recs)) != st.AllReduces {
		t.Fatalf("%d records for %d allreduces", len(recs), st.AllReduces)
	}
	for i, r := range recs {
		want := collective.OneShot
		if i < 4 {
			want = collective.Ring // 6 tokens x 64 x 4 bytes is above the 4-token custom buffer
		}
		if r.Algorithm != want || r.Ranks != 2 || r.Start.IsZero() || r.Duration < 0 {
			t.Errorf("record %d: %+v, want %s", i, r, want)
		}
	}
	g.SetAllReduceHook(nil)
	if _, err := g.Forward(Target, []SeqInput{{Tokens: []int{8}, Start: 7, Pages: pages}}); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 8 {
		t.Errorf("the removed hook still records: %d", len(recs))
	}
}
