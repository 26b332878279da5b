package reporters

import (
	"github.com/reckon-ci/reckon/spec"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

func TestExplainTellsTheStory(t *testing.T) {
	r := sampleRun()
	c := &r.Checks[3] // custom-ar output_throughput vs nccl
	got := Explain(r, c)
	for _, want := range []string{
		"KV cache -91% (10.42 -> 0.90 GiB, 1212416 -> 104857 tokens)",
		"custom AR buffers 3.85 GiB (none in nccl)",
		"allreduce custom (nccl config: nccl)",
		"median TPOT +134% (41 -> 96 ms)",
		"max running requests -88% (256 -> 30)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("explanation %q lacks %q", got, want)
		}
	}
	if strings.HasPrefix(got, "KV cache") == false {
		t.Errorf("the KV change must come first: %q", got)
	}
	// Weights and CUDA graphs barely differ: they are not mentioned.
	if strings.Contains(got, "weights") || strings.Contains(got, "CUDA graphs") || strings.Contains(got, "peak gpu") {
		t.Errorf("insignificant differences mentioned: %q", got)
	}
}

func TestExplainFindsTheComparison(t *testing.T) {
	r := sampleRun()
	c := r.Checks[3]
	if got := Explain(r, &c); !strings.Contains(got, "none in nccl") {
		t.Errorf("comparison with Against (nccl) not found: %q", got)
	}
	// The comparison is the verdict's Against, never a config named in the message.
	c.Against = ""
	if got := Explain(r, &c); strings.Contains(got, "nccl") || !strings.HasPrefix(got, "KV cache 0.90 GiB") {
		t.Errorf("without Against the message's \"vs nccl\" must not name the comparison: %q", got)
	}
	// Against the stored baseline's engine report.
	g := r.ConfigNamed("graph-bs-160")
	g.BaselineEngine["cuda_graph_gib"] = 0.5
	bc := gate.Check{Verdict: gate.Verdict{Name: "tput", Kind: string(spec.KindThroughput), Config: "graph-bs-160", Message: "graph-bs-160: output throughput -12% vs baseline"}, Status: gate.StatusFailed}
	got := Explain(r, &bc)
	if !strings.Contains(got, "CUDA graphs +250% (0.50 -> 1.75 GiB)") || !strings.Contains(got, "KV cache -0.1%") {
		t.Errorf("baseline comparison: %q", got)
	}
	if Explain(r, &gate.Check{Verdict: gate.Verdict{Config: "nope"}}) != "" || Explain(nil, nil) != "" {
		t.Error("explanation for an unknown config")
	}
}

func TestRenderersPreferTheGateExplanation(t *testing.T) {
	r := sampleRun()
	r.Checks[3].Explanation = "gate says: PCIe custom allreduce"
	md := renderMarkdown(r, MaxMarkdownBytes)
	if !strings.Contains(md, "gate says: PCIe custom allreduce") || strings.Contains(md, "none in nccl") {
		t.Errorf("Markdown ignored gate.Check.Explanation:\n%s", md)
	}
	// Passing checks get no computed explanation.
	if e := explanation(r, &r.Checks[0]); e != "" {
		t.Errorf("passing check explained: %q", e)
	}
}

func TestExplainSaysWhyCustomAllreduceWasDisabled(t *testing.T) {
	r := sampleRun()
	cfg := r.ConfigNamed("custom-ar")
	cfg.Engine["allreduce"] = "nccl"
	cfg.Engine["custom_allreduce_disabled_reason"] = "not all GPUs are connected by NVLink"
	c := gate.Check{Verdict: gate.Verdict{Name: "expect", Kind: string(spec.KindExpect), Config: "custom-ar", Message: "custom-ar: allreduce nccl, expected custom"}, Status: gate.StatusFailed}
	if got := Explain(r, &c); !strings.Contains(got, "allreduce nccl; custom allreduce disabled: not all GPUs are connected by NVLink") {
		t.Errorf("fallback reason missing: %q", got)
	}
	// Compared with a config that did use custom allreduce, the difference and the reason show.
	r.ConfigNamed("nccl").Engine["allreduce"] = "custom"
	c.Against = "nccl"
	if got := Explain(r, &c); !strings.Contains(got, "allreduce nccl (nccl config: custom); custom allreduce disabled: not all GPUs") {
		t.Errorf("fallback vs comparison: %q", got)
	}
}
