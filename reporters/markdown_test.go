package reporters

import (
	"bytes"
	"fmt"
	"github.com/reckon-ci/reckon/spec"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

func TestMarkdownFailuresFirstThenTables(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, sampleRun()); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	if !strings.HasPrefix(md, "## ❌ FAIL: reckon gate on `pcie-custom-ar`") {
		t.Errorf("headline: %q", strings.SplitN(md, "\n", 2)[0])
	}
	if !strings.Contains(md, "**5 passed, 2 failed, 1 error, 1 inconclusive, 0 no baseline, 0 skipped, 0 not run** of 9 checks") {
		t.Error("counts missing")
	}
	// The inconclusive check is named at the top, above the failures, so a reader sees what the
	// run did not decide.
	if w, f := strings.Index(md, "decided nothing"), strings.Index(md, "### Failures"); w < 0 || w > f || !strings.Contains(md[w:f], "p99_ttft_ms vs baseline") {
		t.Errorf("undecided checks not listed at the top:\n%s", md[:min(len(md), 1500)])
	}
	fail := strings.Index(md, "### Failures")
	cfgs := strings.Index(md, "### Configs")
	if fail < 0 || cfgs < 0 || fail > cfgs {
		t.Fatalf("failures must come before the config table (%d, %d)", fail, cfgs)
	}
	failures := md[fail:cfgs]
	for _, want := range []string{
		"custom-ar: output throughput -57% vs nccl",
		"KV cache -91% (10.42 -&gt; 0.90 GiB",
		"(infrastructure error)",
		"RuntimeError: CUDA out of memory",
	} {
		if !strings.Contains(failures, want) {
			t.Errorf("failures section lacks %q:\n%s", want, failures)
		}
	}
	if strings.Contains(failures, "started; allreduce nccl") {
		t.Error("a passing check is listed among the failures")
	}
	for _, want := range []string{
		"| custom-ar | 1 | custom | 104857 | 0.90 | 16.10 | 1.22 | 2.01 | 3.85 | 38.30 (n=5) | 30152 | ❌ -57% [-59%, -55%] vs nccl | ✅ vs nccl |",
		"| nccl | 1 | nccl | 1212416 | 10.42 | 16.10 | 1.18 | 2.05 | – | 89.50 (n=5) | 30121 | ✅ +0.4% [-2.0%, +3.0%] vs baseline | ✅ reference for custom-ar |",
		"| ❌ | output\\_throughput vs nccl | relative | custom-ar: output throughput -57% vs nccl (89.50 → 38.30) | -57% | [-59%, -55%] | 0.0079 |",
		"#### Cross-config checks",
		"64/64 prompts identical",
		"allreduce probe: custom one-shot",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	// Engine text in the log fence is inside a code block; outside it no raw HTML survives.
	outside := strings.Replace(md, failures, "", 1)
	if strings.Contains(outside, "<script>") {
		t.Error("raw HTML outside code blocks")
	}
}

func TestMarkdownPassAndInterrupted(t *testing.T) {
	r := sampleRun()
	r.Checks = r.Checks[:2]
	r.Configs = r.Configs[:2]
	md := renderMarkdown(r, MaxMarkdownBytes)
	if !strings.HasPrefix(md, "## ✅ PASS") || strings.Contains(md, "### Failures") {
		t.Errorf("green run:\n%s", md)
	}
	r.Interrupted = true
	md = renderMarkdown(r, MaxMarkdownBytes)
	if !strings.HasPrefix(md, "## ⚠️ INTERRUPTED") || !strings.Contains(md, "results are partial") || !strings.Contains(md, "run interrupted") {
		t.Errorf("interrupted run:\n%s", md)
	}
}

func TestMarkdownEscapesEngineText(t *testing.T) {
	r := &gate.Run{SpecName: "x`y", Configs: []gate.Config{{Name: "a|b", LogTail: "```\nclose the fence\n````\n"}},
		Checks: []gate.Check{
			{Verdict: gate.Verdict{Name: "c|d", Config: "a|b", Kind: string(spec.KindFloor), Message: "<img src=x onerror=alert(1)> **bold** [link](http://x) | pipe"}, Status: gate.StatusFailed},
			{Verdict: gate.Verdict{Name: "h", Config: "a|b", Kind: gate.KindHealth, Message: "died"}, Status: gate.StatusError},
		}}
	md := renderMarkdown(r, MaxMarkdownBytes)
	for _, bad := range []string{"<img", "**bold**", "[link](", "x) | pipe"} {
		if strings.Contains(md, bad) {
			t.Errorf("unescaped %q in:\n%s", bad, md)
		}
	}
	if !strings.Contains(md, "`````text") {
		t.Errorf("log fence not longer than the backticks inside:\n%s", md)
	}
	if !strings.Contains(md, "`x'y`") {
		t.Errorf("backtick in a code span not neutralised:\n%s", md)
	}
}

func TestMarkdownStaysUnderTheLimit(t *testing.T) {
	r := &gate.Run{SpecName: "huge"}
	for i := 0; i < 400; i++ {
		name := fmt.Sprintf("cfg-%03d", i)
		r.Configs = append(r.Configs, gate.Config{Name: name, LogTail: strings.Repeat("x", 5000), Engine: map[string]any{"kv_cache_gib": 1.0}})
		r.Checks = append(r.Checks,
			gate.Check{Verdict: gate.Verdict{Name: "floor", Config: name, Kind: string(spec.KindFloor), Message: strings.Repeat("long verdict ", 60)}, Status: gate.StatusFailed},
			gate.Check{Verdict: gate.Verdict{Name: "health", Config: name, Kind: gate.KindHealth, Message: "engine died"}, Status: gate.StatusError})
	}
	full := renderMarkdown(r, 1<<30)
	if len(full) <= MaxMarkdownBytes {
		t.Fatalf("test input too small to need truncation (%d bytes)", len(full))
	}
	md := renderMarkdown(r, MaxMarkdownBytes)
	if len(md) > MaxMarkdownBytes {
		t.Fatalf("summary is %d bytes, limit %d", len(md), MaxMarkdownBytes)
	}
	if !strings.Contains(md, "Summary truncated") || !strings.Contains(md, "### Failures") || !strings.HasPrefix(md, "## ❌ FAIL") {
		t.Errorf("truncated summary lacks its headline, failures or note")
	}
	tiny := renderMarkdown(r, 300)
	if len(tiny) > 300 {
		t.Errorf("tiny limit exceeded: %d bytes", len(tiny))
	}
}

func TestMarkdownFlagsRelaunches(t *testing.T) {
	r := sampleRun()
	r.Configs[1].Launches = 2
	if md := renderMarkdown(r, MaxMarkdownBytes); !strings.Contains(md, "| custom-ar | 2 ⚠️ |") {
		t.Error("a config launched twice is not flagged")
	}
	if md := renderMarkdown(sampleRun(), MaxMarkdownBytes); strings.Contains(md, "⚠️ |") {
		t.Error("a single launch is flagged")
	}
}
