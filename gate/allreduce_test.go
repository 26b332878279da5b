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
	return &wire.AllReduceProbe{Schema: wire.AllReduceProbeSchemaV1, Source: "refengine", WorldSize: 8, Reference: "ring",
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
