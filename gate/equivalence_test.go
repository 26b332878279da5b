package gate

import (
	"compress/gzip"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/wire"
)

// loadNumerics reads a probe recorded from the reference engine (testdata/numerics/README.md).
func loadNumerics(t *testing.T, name string) *wire.NumericsProbe {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "numerics", name+".json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var p wire.NumericsProbe
	if err := json.NewDecoder(zr).Decode(&p); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &p
}

func f64(x float64) *float64 { return &x }

// equiv judges head vs base with twin (names of recorded probes of one run, "" for none).
func equiv(t *testing.T, run, base, head, twin, oracle string, chk EquivalenceCheck) Verdict {
	t.Helper()
	ps := EquivalenceProbes{Base: loadNumerics(t, run+"-"+base), Head: loadNumerics(t, run+"-"+head)}
	if twin != "" {
		ps.Twin = loadNumerics(t, run+"-"+twin)
	}
	if oracle != "" {
		ps.Oracle = loadNumerics(t, run+"-"+oracle)
	}
	if chk.TopK == 0 {
		chk.TopK = 5
	}
	return Equivalence(ps, chk)
}

// TestEquivalenceCalibratedRealProbes: on the reference engine at tp 4 in bf16, the correct
// one-shot and tree are within the twin's spread of the ring; a 1% allreduce error, a stale
// buffer and a dropped peer are not, each with the ratio, its interval and the worst position.
func TestEquivalenceCalibratedRealProbes(t *testing.T) {
	const run = "refengine-tp4-bf16"
	for _, c := range [][3]string{{"ring", "one-shot", "tree"}, {"ring", "tree", "one-shot"}, {"tree", "one-shot", "ring"}} {
		v := equiv(t, run, c[0], c[1], c[2], "", EquivalenceCheck{})
		if v.Outcome != Pass || !strings.Contains(v.Message, "calibrated by twin "+c[2]) || v.Metrics["ratio"] > 1.5 || v.Metrics["ratio_batched"] == 0 {
			t.Errorf("%s vs %s (twin %s): %s %s\n%s", c[1], c[0], c[2], v.Outcome, v.Message, v.Details)
		}
	}
	for _, c := range []struct{ head, want string }{
		{"error1e-2", "x tree's (one at a time"},
		{"stale-above-8KiB", "x tree's (one at a time"},
		// Messages above 32 KiB occur only when the prompts are scored as one batch.
		{"drop-rank-above-32KiB", "x tree's (under load"},
	} {
		v := equiv(t, run, "ring", c.head, "tree", "", EquivalenceCheck{})
		if v.Outcome != Fail || !strings.Contains(v.Message, c.want) || !strings.Contains(v.Message, "95% CI") || !strings.Contains(v.Message, "max_ratio 1.7") ||
			!strings.Contains(v.Message, "worst prompt") || !strings.Contains(v.Message, "position") {
			t.Errorf("%s: %s %s", c.head, v.Outcome, v.Message)
		}
		t.Logf("%s: %s", c.head, v.Message)
	}
	drop := equiv(t, run, "ring", "drop-rank-above-32KiB", "tree", "", EquivalenceCheck{})
	if drop.Metrics["ratio"] > DefaultMaxRatio || drop.Metrics["ratio_batched"] < 10 {
		t.Errorf("drop-rank above 32KiB should be invisible alone and gross under load: %v", drop.Metrics)
	}
	// A looser max_ratio takes effect.
	if v := equiv(t, run, "ring", "error1e-2", "tree", "", EquivalenceCheck{MaxRatio: f64(50)}); v.Outcome != Pass {
		t.Errorf("max_ratio 50: %s %s", v.Outcome, v.Message)
	}
}

// TestEquivalenceOracle: with an oracle (the fixed-order single-rounding sum, which the reference
// engine's one-shot is), distances are measured from the oracle and divided by the largest
// trusted one.
func TestEquivalenceOracle(t *testing.T) {
	const run = "refengine-tp4-bf16"
	v := equiv(t, run, "ring", "tree", "", "one-shot", EquivalenceCheck{})
	if v.Outcome != Pass || !strings.Contains(v.Message, "calibrated by oracle one-shot") {
		t.Errorf("tree vs ring, oracle one-shot: %s %s", v.Outcome, v.Message)
	}
	v = equiv(t, run, "ring", "error1e-2", "tree", "one-shot", EquivalenceCheck{})
	if v.Outcome != Fail || !strings.Contains(v.Message, "oracle one-shot and twin tree") || !strings.Contains(v.Message, "ring and tree's") {
		t.Errorf("fault vs ring, oracle one-shot, twin tree: %s %s", v.Outcome, v.Message)
	}
}

// TestEquivalenceNearBitwise: at tp 2 every correct single-rounding allreduce is bit-identical,
// so the twin's distance is 0 and the candidate must be near-bitwise; in float32 at tp 8 the
// correct algorithms differ by ULPs and a 0.1% error is thousands of times the twin's distance.
func TestEquivalenceNearBitwise(t *testing.T) {
	v := equiv(t, "refengine-tp2-bf16", "ring", "one-shot", "tree", "", EquivalenceCheck{})
	if v.Outcome != Pass || !strings.Contains(v.Message, "near-bitwise") || v.Metrics["max_abs_logprob_diff"] != 0 {
		t.Errorf("tp 2 one-shot: %s %s", v.Outcome, v.Message)
	}
	v = equiv(t, "refengine-tp2-bf16", "ring", "error1e-2", "tree", "", EquivalenceCheck{})
	if v.Outcome != Fail || !strings.Contains(v.Message, "near-bitwise expected") || !strings.Contains(v.Message, "positions differ") {
		t.Errorf("tp 2 fault: %s %s", v.Outcome, v.Message)
	}
	t.Logf("tp 2 fault: %s", v.Message)
	v = equiv(t, "refengine-tp8-fp32", "ring", "one-shot", "tree", "", EquivalenceCheck{})
	if v.Outcome != Pass {
		t.Errorf("fp32 tp 8 one-shot: %s %s", v.Outcome, v.Message)
	}
	v = equiv(t, "refengine-tp8-fp32", "ring", "error1e-3", "tree", "", EquivalenceCheck{})
	if v.Outcome != Fail || v.Metrics["ratio"] < 100 {
		t.Errorf("fp32 tp 8 0.1%% error: %s %s", v.Outcome, v.Message)
	}
	// bitwise_tolerance takes effect: a budget above the fault's |Δ| lets it through.
	if v := equiv(t, "refengine-tp2-bf16", "ring", "error1e-2", "tree", "", EquivalenceCheck{BitwiseTolerance: f64(10), MaxRatio: f64(1e9)}); v.Outcome != Pass {
		t.Errorf("bitwise_tolerance 10: %s %s", v.Outcome, v.Message)
	}
}

// TestEquivalenceUncalibrated: without twin or oracle the bound comes from the dtype's unit
// roundoff and the tp size, and every verdict says it is uncalibrated; an explicit 0 is 0.
func TestEquivalenceUncalibrated(t *testing.T) {
	v := equiv(t, "refengine-tp4-bf16", "ring", "one-shot", "", "", EquivalenceCheck{DType: "bfloat16", TP: 4})
	if v.Outcome != Pass || !strings.Contains(v.Message, "uncalibrated") || !strings.Contains(v.Message, "bfloat16 unit roundoff at tp 4") {
		t.Errorf("uncalibrated one-shot: %s %s", v.Outcome, v.Message)
	}
	if got, want := v.Metrics["max_distance"], UncalibratedBound("bfloat16", 4); got != want {
		t.Errorf("bound %v, want %v", got, want)
	}
	v = equiv(t, "refengine-tp4-bf16", "ring", "stale-above-8KiB", "", "", EquivalenceCheck{DType: "bfloat16", TP: 4})
	if v.Outcome != Fail || !strings.Contains(v.Message, "uncalibrated") {
		t.Errorf("uncalibrated stale: %s %s", v.Outcome, v.Message)
	}
	v = equiv(t, "refengine-tp4-bf16", "ring", "one-shot", "", "", EquivalenceCheck{MaxDistance: f64(0)})
	if v.Outcome != Fail || !strings.Contains(v.Message, "max_distance") {
		t.Errorf("max_distance 0: %s %s", v.Outcome, v.Message)
	}
	if v := equiv(t, "refengine-tp4-bf16", "ring", "ring", "", "", EquivalenceCheck{MaxDistance: f64(0)}); v.Outcome != Pass {
		t.Errorf("identical with max_distance 0: %s %s", v.Outcome, v.Message)
	}
	v = equiv(t, "refengine-tp4-bf16", "ring", "one-shot", "", "", EquivalenceCheck{})
	if !strings.Contains(v.Message, "dtype unknown") {
		t.Errorf("unknown dtype not said: %s", v.Message)
	}
}

func TestUncalibratedBound(t *testing.T) {
	if UncalibratedBound("bfloat16", 1) != 0 {
		t.Error("tp 1 has no allreduce: bound 0")
	}
	b4, b8 := UncalibratedBound("bfloat16", 4), UncalibratedBound("bfloat16", 8)
	if !(b8 > b4) || math.Abs(b4-UncalibratedGain*0x1p-8*math.Sqrt(2)) > 1e-15 {
		t.Errorf("bf16 bounds %v %v", b4, b8)
	}
	if f := UncalibratedBound("torch.float32", 4); f > b4/60000 || f == 0 {
		t.Errorf("fp32 bound %v", f)
	}
	if UncalibratedBound("fp16", 4) >= b4 || UncalibratedBound("", 4) != b4 {
		t.Error("fp16 tighter than bf16, unknown dtype as bf16")
	}
}

// mkForced builds a probe whose forced sequences are scored with logprobs lp(prompt, position)
// for the forced token, its top-1, and two runners-up.
func mkForced(config string, prompts, n int, shift func(k, i int) float64) *wire.NumericsProbe {
	p := &wire.NumericsProbe{Schema: wire.NumericsSchema, Config: config, TopK: 3, ForcedFrom: "base"}
	for k := 0; k < prompts; k++ {
		np := wire.NumericsPrompt{ID: string(rune('a' + k)), Prompt: "prompt " + string(rune('a'+k))}
		for i := 0; i < n; i++ {
			np.ForcedTokens = append(np.ForcedTokens, 10+i)
			np.Output = append(np.Output, wire.TokenLogprob{Token: 10 + i, Logprob: -0.5, Top: []wire.TokenCandidate{{Token: 10 + i, Logprob: -0.5}, {Token: 500, Logprob: -1.5}}})
		}
		np.ForcedTokens = append(np.ForcedTokens, 10+n)
		for i := 1; i <= n; i++ {
			s := shift(k, i)
			top := []wire.TokenCandidate{{Token: 10 + i, Logprob: -0.3 + s}, {Token: 300, Logprob: -2 - s}, {Token: 301, Logprob: -3}}
			e := wire.TokenLogprob{Token: 10 + i, Logprob: -0.3 + s, Top: top}
			np.Forced = append(np.Forced, e)
			np.ForcedBatched = append(np.ForcedBatched, e)
		}
		p.Prompts = append(p.Prompts, np)
	}
	return p
}

func TestEquivalenceSyntheticRules(t *testing.T) {
	zero := func(k, i int) float64 { return 0 }
	wiggle := func(a float64) func(k, i int) float64 {
		return func(k, i int) float64 { return a * math.Sin(float64(3*k+i)) }
	}
	base := mkForced("base", 8, 10, zero)
	twin := mkForced("twin", 8, 10, wiggle(0.01))
	// A candidate like the twin passes; ten times its distance fails.
	if v := Equivalence(EquivalenceProbes{Base: base, Head: mkForced("head", 8, 10, wiggle(0.011)), Twin: twin}, EquivalenceCheck{}); v.Outcome != Pass {
		t.Errorf("like the twin: %s %s", v.Outcome, v.Message)
	}
	if v := Equivalence(EquivalenceProbes{Base: base, Head: mkForced("head", 8, 10, wiggle(0.1)), Twin: twin}, EquivalenceCheck{}); v.Outcome != Fail || v.Metrics["ratio"] < 5 {
		t.Errorf("ten times the twin: %s %s", v.Outcome, v.Message)
	}
	// bitwise_tolerance 0 means exactly 0: the twin is identical, a 1e-9 wiggle fails.
	exact := mkForced("twin", 8, 10, zero)
	if v := Equivalence(EquivalenceProbes{Base: base, Head: mkForced("head", 8, 10, wiggle(1e-9)), Twin: exact}, EquivalenceCheck{BitwiseTolerance: f64(0)}); v.Outcome != Fail {
		t.Errorf("bitwise 0: %s %s", v.Outcome, v.Message)
	}
	if v := Equivalence(EquivalenceProbes{Base: base, Head: mkForced("head", 8, 10, wiggle(1e-9)), Twin: exact}, EquivalenceCheck{}); v.Outcome != Pass {
		t.Errorf("default bitwise budget 1e-6: %s %s", v.Outcome, v.Message)
	}
	// The optional bounds apply only when set, and an explicit 0 is 0.
	head := mkForced("head", 8, 10, wiggle(0.011))
	if v := Equivalence(EquivalenceProbes{Base: base, Head: head, Twin: twin}, EquivalenceCheck{MeanAbsLogprob: f64(0)}); v.Outcome != Fail || !strings.Contains(v.Message, "mean_abs_logprob_delta") {
		t.Errorf("mean 0: %s %s", v.Outcome, v.Message)
	}
	head.Prompts[2].Output[4].Token = 500 // the runner-up: a near tie
	head.Prompts[2].Output[4].Top = []wire.TokenCandidate{{Token: 500, Logprob: -0.5}, {Token: 14, Logprob: -0.51}}
	if v := Equivalence(EquivalenceProbes{Base: base, Head: head, Twin: twin}, EquivalenceCheck{}); v.Outcome != Pass || v.Metrics["divergences"] != 1 {
		t.Errorf("near-tie divergence, no min_exact_match: %s %s", v.Outcome, v.Message)
	}
	if v := Equivalence(EquivalenceProbes{Base: base, Head: head, Twin: twin}, EquivalenceCheck{MinExactMatch: f64(1)}); v.Outcome != Fail || !strings.Contains(v.Message, "min_exact_match") {
		t.Errorf("min_exact_match 1: %s %s", v.Outcome, v.Message)
	}
	// Garbage in the free-running output fails even when the forced scores agree.
	head.Prompts[2].Output[4].Token = 999
	head.Prompts[2].Output[4].Top = []wire.TokenCandidate{{Token: 999, Logprob: -0.1}}
	if v := Equivalence(EquivalenceProbes{Base: base, Head: head, Twin: twin}, EquivalenceCheck{TopK: 2}); v.Outcome != Fail || !strings.Contains(v.Message, "outside the top-2") {
		t.Errorf("divergence outside top-k: %s %s", v.Outcome, v.Message)
	}
	// No under-load pass in one probe: judged alone, and said.
	nob := mkForced("head", 8, 10, wiggle(0.011))
	for i := range nob.Prompts {
		nob.Prompts[i].ForcedBatched = nil
	}
	v := Equivalence(EquivalenceProbes{Base: base, Head: nob, Twin: twin}, EquivalenceCheck{})
	if v.Outcome != Pass || !strings.Contains(v.Details, "judged one request at a time only") {
		t.Errorf("no batched pass: %s %s", v.Outcome, v.Details)
	}
}

func TestEquivalenceBadInput(t *testing.T) {
	zero := func(k, i int) float64 { return 0 }
	base := mkForced("base", 4, 6, zero)
	cases := []struct {
		name  string
		mut   func(h *wire.NumericsProbe)
		words string
	}{
		{"other run", func(h *wire.NumericsProbe) { h.ForcedFrom = "elsewhere" }, "different sequences"},
		{"other tokens", func(h *wire.NumericsProbe) { h.Prompts[1].ForcedTokens[3] = 77 }, "forced token 3"},
		{"no forced", func(h *wire.NumericsProbe) { h.Prompts[0].Forced = nil }, "no teacher-forced scores"},
		{"missing prompt", func(h *wire.NumericsProbe) { h.Prompts = h.Prompts[:3] }, "different prompts"},
		{"bad schema", func(h *wire.NumericsProbe) { h.Schema = "x/v0" }, "schema"},
	}
	for _, c := range cases {
		h := mkForced("head", 4, 6, zero)
		c.mut(h)
		v := Equivalence(EquivalenceProbes{Base: base, Head: h, Twin: mkForced("twin", 4, 6, zero)}, EquivalenceCheck{})
		if v.Outcome != Error || !strings.Contains(v.Message, c.words) {
			t.Errorf("%s: %s %s", c.name, v.Outcome, v.Message)
		}
	}
	if v := Equivalence(EquivalenceProbes{Base: base}, EquivalenceCheck{}); v.Outcome != Error {
		t.Errorf("missing head: %s", v.Outcome)
	}
}

// TestKLTopK: identical distributions score 0; two near-tied tokens trading places at the edge
// of the top-k cost almost nothing; moving mass to an unlisted token costs through the lumped bin.
func TestKLTopK(t *testing.T) {
	ref := wire.TokenLogprob{Token: 1, Logprob: -0.2, Top: []wire.TokenCandidate{{Token: 1, Logprob: -0.2}, {Token: 2, Logprob: -2}, {Token: 3, Logprob: -6}, {Token: 4, Logprob: -6.0001}}}
	if kl := klTopK(ref, ref); kl != 0 {
		t.Errorf("identical: %v", kl)
	}
	swap := ref
	swap.Top = []wire.TokenCandidate{{Token: 1, Logprob: -0.2}, {Token: 2, Logprob: -2}, {Token: 4, Logprob: -6}, {Token: 5, Logprob: -6.0001}}
	if kl := klTopK(ref, swap); kl > 1e-3 {
		t.Errorf("edge swap: %v", kl)
	}
	moved := wire.TokenLogprob{Token: 1, Logprob: -2, Top: []wire.TokenCandidate{{Token: 9, Logprob: -0.2}, {Token: 1, Logprob: -2}, {Token: 2, Logprob: -3}}}
	if kl := klTopK(ref, moved); kl < 0.5 {
		t.Errorf("mass moved: %v", kl)
	}
	// Tail candidates (reference log p < -16) are lumped, not compared.
	tail := wire.TokenLogprob{Token: 1, Logprob: -0.2, Top: []wire.TokenCandidate{{Token: 1, Logprob: -0.2}, {Token: 7, Logprob: -20}}}
	tail2 := tail
	tail2.Top = []wire.TokenCandidate{{Token: 1, Logprob: -0.2}, {Token: 7, Logprob: -25}}
	if kl := klTopK(tail, tail2); kl > 1e-9 {
		t.Errorf("tail: %v", kl)
	}
}
