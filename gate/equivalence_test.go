package gate

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/wire"
)

// mkProbe builds a probe with deterministic greedy outputs: prompt p, position i chooses token
// 100*p+i with logprob -0.1*(i+1), with the next two tokens as runners-up.
func mkProbe(config string, prompts, outLen, promptLen int) *wire.NumericsProbe {
	p := &wire.NumericsProbe{Schema: wire.NumericsSchema, Config: config, TopK: 3}
	for k := 0; k < prompts; k++ {
		np := wire.NumericsPrompt{ID: "p" + string(rune('a'+k)), Prompt: "prompt " + string(rune('a'+k))}
		for i := 0; i < outLen; i++ {
			tok := 100*k + i
			lp := -0.1 * float64(i+1)
			np.Output = append(np.Output, wire.TokenLogprob{Token: tok, Text: "t" + itoa(tok), Logprob: lp, Top: []wire.TokenCandidate{
				{Token: tok, Logprob: lp}, {Token: tok + 1000, Logprob: lp - 0.05}, {Token: tok + 2000, Logprob: lp - 2},
			}})
		}
		for i := 0; i < promptLen; i++ {
			np.PromptLogprobs = append(np.PromptLogprobs, wire.TokenLogprob{Token: 7 + i, Logprob: -1 - 0.2*float64(i)})
		}
		p.Prompts = append(p.Prompts, np)
	}
	return p
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func cloneProbe(p *wire.NumericsProbe, config string) *wire.NumericsProbe {
	b, _ := json.Marshal(p)
	var out wire.NumericsProbe
	_ = json.Unmarshal(b, &out)
	out.Config = config
	return &out
}

// perturb adds delta(prompt, position) to every output and prompt logprob.
func perturb(p *wire.NumericsProbe, delta func(k, i int) float64) {
	for k := range p.Prompts {
		for i := range p.Prompts[k].Output {
			p.Prompts[k].Output[i].Logprob += delta(k, i)
		}
		for i := range p.Prompts[k].PromptLogprobs {
			p.Prompts[k].PromptLogprobs[i].Logprob += delta(k, i)
		}
	}
}

func TestEquivalenceIdenticalAndSmallDrift(t *testing.T) {
	base := mkProbe("nccl", 4, 8, 5)
	v := Equivalence(base, cloneProbe(base, "custom-ar"), EquivalenceTolerance{})
	if v.Outcome != Pass || v.Metrics["exact_match_fraction"] != 1 || v.Metrics["max_abs_logprob_diff"] != 0 {
		t.Fatalf("identical: %s %s", v.Outcome, v.Message)
	}
	head := cloneProbe(base, "custom-ar")
	perturb(head, func(k, i int) float64 { return 0.003 * math.Sin(float64(7*k+i)) })
	v = Equivalence(base, head, EquivalenceTolerance{})
	if v.Outcome != Pass || v.Config != "custom-ar vs nccl" {
		t.Fatalf("bf16-like drift: %s %s", v.Outcome, v.Message)
	}
}

func TestEquivalenceNearTieDivergenceAccepted(t *testing.T) {
	base := mkProbe("nccl", 4, 8, 5)
	head := cloneProbe(base, "custom-ar")
	// Prompt pb at position 3 picks the runner-up (a near tie); after that it drifts entirely.
	o := head.Prompts[1].Output
	tok := o[3].Token
	o[3].Token, o[3].Top[0].Token, o[3].Top[1].Token = tok+1000, tok+1000, tok
	for i := 4; i < len(o); i++ {
		o[i].Token += 5000
		o[i].Logprob -= 3 // ignored after the divergence
	}
	v := Equivalence(base, head, EquivalenceTolerance{})
	if v.Outcome != Pass || v.Metrics["divergences"] != 1 || v.Metrics["exact_match_fraction"] != 0.75 {
		t.Fatalf("near tie: %s %s\n%s", v.Outcome, v.Message, v.Details)
	}
	if !strings.Contains(v.Details, `prompt "pb" output position 3`) || !strings.Contains(v.Details, "accepted") {
		t.Errorf("details:\n%s", v.Details)
	}
}

func TestEquivalenceDivergenceOutsideTopK(t *testing.T) {
	base := mkProbe("nccl", 4, 8, 5)
	head := cloneProbe(base, "custom-ar")
	o := head.Prompts[2].Output
	o[5].Token, o[5].Text, o[5].Logprob = 4242, "zz", -0.01
	o[5].Top = []wire.TokenCandidate{{Token: 4242, Logprob: -0.01}, {Token: 1, Logprob: -5}}
	v := Equivalence(base, head, EquivalenceTolerance{})
	if v.Outcome != Fail {
		t.Fatalf("outside top-k: %s %s", v.Outcome, v.Message)
	}
	for _, want := range []string{`prompt "pc" diverges at output position 5`, `nccl has token 205 "t205" (logprob -0.6000)`,
		`custom-ar has token 4242 "zz" (logprob -0.0100)`, "not in custom-ar's top-2", "not in nccl's top-3"} {
		if !strings.Contains(v.Message, want) {
			t.Errorf("message lacks %q:\n%s", want, v.Message)
		}
	}
	// With top-1 only the near tie of the previous test is rejected too.
	head = cloneProbe(base, "custom-ar")
	o = head.Prompts[1].Output
	o[3].Token = o[3].Top[1].Token
	if v := Equivalence(base, head, EquivalenceTolerance{TopK: 1}); v.Outcome != Fail {
		t.Errorf("top-1: %s %s", v.Outcome, v.Message)
	}
}

func TestEquivalenceLogprobDriftFails(t *testing.T) {
	base := mkProbe("nccl", 4, 8, 5)
	head := cloneProbe(base, "custom-ar")
	// A faulty allreduce (1e-2 relative error) moves logprobs by ~0.05 everywhere and 0.4 at one
	// prompt position.
	perturb(head, func(k, i int) float64 { return 0.05 * math.Cos(float64(k+3*i)) })
	head.Prompts[3].PromptLogprobs[2].Logprob = base.Prompts[3].PromptLogprobs[2].Logprob - 0.4
	v := Equivalence(base, head, EquivalenceTolerance{})
	if v.Outcome != Fail {
		t.Fatalf("drift: %s %s", v.Outcome, v.Message)
	}
	if !strings.Contains(v.Message, `max |Δ logprob| 0.4000 > 0.1 at prompt "pd" prompt position 3`) {
		t.Errorf("message: %s", v.Message)
	}
	if !strings.Contains(v.Details, "mean |Δ logprob|") {
		t.Errorf("details lack the mean problem:\n%s", v.Details)
	}
	// Mean alone.
	head = cloneProbe(base, "custom-ar")
	perturb(head, func(k, i int) float64 { return 0.03 })
	v = Equivalence(base, head, EquivalenceTolerance{})
	if v.Outcome != Fail || !strings.Contains(v.Message, "mean |Δ logprob| 0.0300 > 0.01") {
		t.Errorf("mean: %s %s", v.Outcome, v.Message)
	}
}

func TestEquivalenceExactMatchFraction(t *testing.T) {
	base := mkProbe("nccl", 4, 8, 0)
	head := cloneProbe(base, "custom-ar")
	for k := 0; k < 3; k++ { // three of four prompts take a near-tie branch at the end
		o := head.Prompts[k].Output
		o[7].Token = o[7].Top[1].Token
	}
	v := Equivalence(base, head, EquivalenceTolerance{})
	if v.Outcome != Fail || !strings.Contains(v.Message, "1 of 4 prompts identical (25% < 50%)") {
		t.Errorf("%s %s", v.Outcome, v.Message)
	}
	if v := Equivalence(base, head, EquivalenceTolerance{MinExactMatch: -1}); v.Outcome != Pass {
		t.Errorf("disabled bound: %s %s", v.Outcome, v.Message)
	}
}

func TestEquivalenceBadInput(t *testing.T) {
	base := mkProbe("nccl", 4, 8, 5)
	head := mkProbe("custom-ar", 3, 8, 5)
	v := Equivalence(base, head, EquivalenceTolerance{})
	if v.Outcome != Error || !strings.Contains(v.Message, `custom-ar lacks ["pd"]`) {
		t.Errorf("prompt sets: %s %s", v.Outcome, v.Message)
	}
	head = cloneProbe(base, "custom-ar")
	head.Prompts[0].PromptLogprobs[1].Token = 99
	if v := Equivalence(base, head, EquivalenceTolerance{}); v.Outcome != Error || !strings.Contains(v.Message, "tokenized differently") {
		t.Errorf("tokens: %s %s", v.Outcome, v.Message)
	}
	head = cloneProbe(base, "custom-ar")
	head.Schema = "reckon.numerics/v0"
	if v := Equivalence(base, head, EquivalenceTolerance{}); v.Outcome != Error {
		t.Errorf("schema: %s", v.Outcome)
	}
	head = cloneProbe(base, "custom-ar")
	head.Prompts[0].Output[2].Token = 1
	head.Prompts[0].Output[2].Top = nil
	if v := Equivalence(base, head, EquivalenceTolerance{}); v.Outcome != Fail || !strings.Contains(v.Message, "no top-k candidates") {
		t.Errorf("no top-k: %s %s", v.Outcome, v.Message)
	}
	if v := Equivalence(nil, head, EquivalenceTolerance{}); v.Outcome != Error {
		t.Errorf("nil: %s", v.Outcome)
	}
}

func loadARProbe(t *testing.T, name string) *wire.AllReduceProbe {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var p wire.AllReduceProbe
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &p
}

func arProbe() *wire.AllReduceProbe {
	yes := true
	return &wire.AllReduceProbe{Schema: wire.AllReduceProbeSchema, Source: "refengine", WorldSize: 8, Reference: "ring",
		Results: []wire.AllReduceProbeCase{
			{SizeBytes: 1 << 20, Elements: 1 << 18, DType: "float32", Inputs: "random", Algorithms: []wire.AllReduceProbeAlgorithm{
				{Name: "ring", MaxRelErr: 3e-7, RanksIdentical: &yes}, {Name: "one_shot", MaxRelErr: 2e-7, RanksIdentical: &yes}}},
			{SizeBytes: 1 << 20, Elements: 1 << 19, DType: "bfloat16", Inputs: "random", Algorithms: []wire.AllReduceProbeAlgorithm{
				{Name: "ring", MaxRelErr: 9e-3}, {Name: "one_shot", MaxRelErr: 3.9e-3}, {Name: "two_shot", Skipped: "size below 2 MiB"}}},
			{SizeBytes: 1 << 20, Elements: 1 << 19, DType: "bfloat16", Inputs: "integer", Algorithms: []wire.AllReduceProbeAlgorithm{
				{Name: "ring", Exact: true}, {Name: "one_shot", Exact: true}},
				Pairs: []wire.AllReduceProbePair{{A: "one_shot", B: "ring", Identical: true}}},
		}}
}

func TestDefaultAllReduceTolerances(t *testing.T) {
	// γ(n-1) from docs/allreduce-probe.md.
	for _, c := range []struct {
		n     int
		dtype string
		want  float64
	}{{2, "float32", 5.96e-8}, {8, "float32", 4.17e-7}, {2, "bfloat16", 3.92e-3}, {4, "bfloat16", 1.18e-2}, {8, "bfloat16", 2.81e-2}, {0, "bfloat16", 2.81e-2}} {
		got := DefaultAllReduceTolerances(c.n)[c.dtype].MaxRelErr
		if math.Abs(got-c.want)/c.want > 0.01 {
			t.Errorf("n=%d %s: %.4g, want %.4g", c.n, c.dtype, got, c.want)
		}
	}
}

// TestAllReduceProbeCheckRealProbes judges probes recorded from the reference engine (8 simulated
// ranks) and from torch.distributed on 2 H200s (testdata/allreduce/README.md), then the same
// probes with the faults a broken kernel produces.
func TestAllReduceProbeCheckRealProbes(t *testing.T) {
	for _, name := range []string{"refengine-tp8.json", "torch-h200x2.json"} {
		p := loadARProbe(t, filepath.Join("allreduce", name))
		v := AllReduceProbeCheck(p, nil)
		if v.Outcome != Pass {
			t.Errorf("%s: %s %s\n%s", name, v.Outcome, v.Message, v.Details)
		}
	}
	// A stale peer buffer: one rank's addend missing, an error of about 1/n of the magnitude.
	p := loadARProbe(t, filepath.Join("allreduce", "refengine-tp8.json"))
	for i, c := range p.Results {
		if c.DType == "bfloat16" && c.Inputs == "random" && c.SizeBytes == 1<<20 {
			p.Results[i].Algorithms[1].MaxRelErr = 0.13
		}
	}
	v := AllReduceProbeCheck(p, nil)
	if v.Outcome != Fail || !strings.Contains(v.Message, "bfloat16 random inputs, 1 MiB (524288 elements): one_shot max_rel_err 0.13 > 0.0281") {
		t.Errorf("stale buffer: %s %s", v.Outcome, v.Message)
	}
	// Integer inputs that are not exact on the GPU probe.
	p = loadARProbe(t, filepath.Join("allreduce", "torch-h200x2.json"))
	for i, c := range p.Results {
		if c.Inputs == "integer" {
			p.Results[i].Algorithms[0].Exact = false
			p.Results[i].Algorithms[0].MaxAbsErr = 1
			break
		}
	}
	if v := AllReduceProbeCheck(p, nil); v.Outcome != Fail || !strings.Contains(v.Message, "not exact on integer inputs") {
		t.Errorf("integer: %s %s", v.Outcome, v.Message)
	}
}

func TestAllReduceProbeCheck(t *testing.T) {
	v := AllReduceProbeCheck(arProbe(), nil)
	if v.Outcome != Pass || !strings.Contains(v.Message, "worst ring at float32 random inputs, 1 MiB (262144 elements): max_rel_err 3e-07 (72% of its limit)") {
		t.Fatalf("good: %s %s", v.Outcome, v.Message)
	}
	p := arProbe()
	p.Results[1].Algorithms[1].MaxRelErr = 5e-2 // bf16 one_shot with an injected error
	v = AllReduceProbeCheck(p, nil)
	if v.Outcome != Fail || !strings.Contains(v.Message, "bfloat16 random inputs, 1 MiB (524288 elements): one_shot max_rel_err 0.05 > 0.0281") {
		t.Errorf("bf16 error: %s %s", v.Outcome, v.Message)
	}
	// A caller-supplied tighter tolerance.
	if v := AllReduceProbeCheck(arProbe(), map[string]Tolerance{"bfloat16": {MaxRelErr: 5e-3}}); v.Outcome != Fail || !strings.Contains(v.Message, "ring max_rel_err 0.009") {
		t.Errorf("custom tolerance: %s %s", v.Outcome, v.Message)
	}
	p = arProbe()
	p.Results[2].Algorithms[1].Exact = false
	p.Results[2].Algorithms[1].MaxAbsErr = 1
	p.Results[1].Algorithms[0].MaxRelErr = 3e-2 // above the 8-rank bound 0.0281
	v = AllReduceProbeCheck(p, nil)
	if v.Outcome != Fail || !strings.Contains(v.Message, "one_shot is not exact on integer inputs") || !strings.Contains(v.Message, "and 1 more") {
		t.Errorf("integer: %s %s", v.Outcome, v.Message)
	}
	p = arProbe()
	no := false
	p.Results[0].Algorithms[1].RanksIdentical = &no
	if v := AllReduceProbeCheck(p, nil); v.Outcome != Fail || !strings.Contains(v.Message, "ranks holding different results") {
		t.Errorf("ranks: %s %s", v.Outcome, v.Message)
	}
	p = arProbe()
	p.Results[0].DType = "float8_e4m3"
	if v := AllReduceProbeCheck(p, nil); v.Outcome != Error || !strings.Contains(v.Message, `results[0] has dtype "float8_e4m3"`) {
		t.Errorf("dtype: %s %s", v.Outcome, v.Message)
	}
	p = arProbe()
	p.Schema = "other/v9"
	if v := AllReduceProbeCheck(p, nil); v.Outcome != Error {
		t.Errorf("schema: %s", v.Outcome)
	}
	for i := range p.Results {
		for j := range p.Results[i].Algorithms {
			p.Results[i].Algorithms[j].Skipped = "no GPU"
		}
	}
	p.Schema = ""
	if v := AllReduceProbeCheck(p, nil); v.Outcome != Error || !strings.Contains(v.Message, "every algorithm was skipped") {
		t.Errorf("skipped: %s %s", v.Outcome, v.Message)
	}
}

func loadNumerics(t *testing.T, name string) *wire.NumericsProbe {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "numerics", name))
	if err != nil {
		t.Fatal(err)
	}
	var p wire.NumericsProbe
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &p
}

// TestEquivalenceRealProbes uses probes recorded from the reference engine at tp 4, bfloat16
// (testdata/numerics/README.md): ring vs one-shot allreduce is equivalent; one-shot with a 1e-2
// relative allreduce fault is not, and the message names the worst position.
func TestEquivalenceRealProbes(t *testing.T) {
	base := loadNumerics(t, "refengine-tp4-bf16-nccl.json")
	v := Equivalence(base, loadNumerics(t, "refengine-tp4-bf16-custom-ar.json"), EquivalenceTolerance{})
	if v.Outcome != Pass {
		t.Errorf("ring vs one-shot: %s %s\n%s", v.Outcome, v.Message, v.Details)
	}
	v = Equivalence(base, loadNumerics(t, "refengine-tp4-bf16-custom-ar-fault1e-2.json"), EquivalenceTolerance{})
	if v.Outcome != Fail || !strings.Contains(v.Message, "mean |Δ logprob|") || !strings.Contains(v.Message, "worst at prompt") ||
		!strings.Contains(v.Message, "position") || !strings.Contains(v.Message, "nccl token") {
		t.Errorf("fault: %s %s\n%s", v.Outcome, v.Message, v.Details)
	}
	t.Logf("fault verdict: %s", v.Message)
}
