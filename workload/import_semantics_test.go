package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLenRangeDefinitions pins the two tools' range-ratio definitions: reckon's (and vLLM's)
// [L(1−r), L(1+r)], SGLang's [max(⌊L·r⌋, 1), L].
func TestLenRangeDefinitions(t *testing.T) {
	for _, c := range []struct {
		got  *LenRange
		want string
	}{
		{SGLangLenRange(1024, 0), "1..1024"}, // SGLang's default: 1..L
		{SGLangLenRange(1024, 1), "1024"},    // r = 1: fixed length
		{SGLangLenRange(1024, 0.5), "512..1024"},
		{SGLangLenRange(10, 0.05), "1..10"}, // ⌊0.5⌋ = 0, raised to 1
		{ReckonLenRange(1024, 0), "1024"},   // reckon/vLLM r = 0: fixed length
		{ReckonLenRange(1024, 0.5), "512..1536"},
		{ReckonLenRange(50, 0.1), "45..56"}, // 50·1.1 = 55.000…01 in floating point: ⌈⌉ = 56, in vLLM too
		{SGLangLenRange(0, 1), "unknown"},
	} {
		if c.got.String() != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}

// TestSGLangRangeRatioFixed: an SGLang file with --random-range-ratio 1 (fixed lengths) imports
// as fixed lengths, not as reckon's range ratio 1 (0..2L). The file's own totals prove the
// definition: 10000 requests of input 1 and output 512 hold exactly 10000 and 5,120,000 tokens.
func TestSGLangRangeRatioFixed(t *testing.T) {
	r, err := ImportFile(fixtures + "sglang-bench-serving-few-keys.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	w := r.Metadata.Workload
	if w.RangeRatio != 0 || w.InputLen != 1 || w.OutputLen != 512 || w.InputLens.String() != "1" || w.OutputLens.String() != "512" {
		t.Errorf("workload %+v: want fixed input 1, output 512 and no reckon range ratio", w)
	}
	if w.ToolSettings["sglang.random_range_ratio"] != "1.0" || w.ToolSettings["sglang.random_input_len"] != "1" {
		t.Errorf("tool settings %v: want SGLang's own values under its names", w.ToolSettings)
	}
	if r.TotalInputTokens != r.Completed*w.InputLens.Max || r.TotalOutputTokens != r.Completed*w.OutputLens.Max {
		t.Errorf("totals %d/%d over %d requests: not the fixed lengths %s/%s", r.TotalInputTokens, r.TotalOutputTokens, r.Completed, w.InputLens, w.OutputLens)
	}
}

// TestSGLangRangeRatioDefault: SGLang's default ratio 0 draws from 1..L; reckon's range ratio
// and input_len are left out (their meaning differs) and the interval says what was drawn. The
// file's mean input length per request lies at the middle of 1..1024, where reckon's reading of
// ratio 0 (a fixed 1024) would put it at 1024.
func TestSGLangRangeRatioDefault(t *testing.T) {
	rs, err := ImportAll(fixtures + "sglang-bench-serving-offline.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	w := r.Metadata.Workload
	if w.InputLens.String() != "1..1024" || w.OutputLens.String() != "1..1024" || w.InputLen != 0 || w.OutputLen != 0 || w.RangeRatio != 0 {
		t.Fatalf("workload %+v", w)
	}
	mean := float64(r.TotalInputTokens) / float64(r.Completed)
	mid := float64(w.InputLens.Min+w.InputLens.Max) / 2
	if mean < 0.95*mid || mean > 1.05*mid {
		t.Errorf("mean input length %.1f, want about %.1f (the middle of %s)", mean, mid, w.InputLens)
	}
	if !strings.Contains(strings.Join(r.Warnings, "\n"), "reckon's range ratio means L(1±r)") {
		t.Errorf("no warning names the conversion: %v", r.Warnings)
	}
	// A sharegpt record keeps the random_* settings under SGLang's names but reads none.
	sg := rs[3].Metadata.Workload
	if sg.Dataset != "sharegpt" || sg.InputLens != nil || sg.InputLen != 0 || sg.ToolSettings["sglang.random_input_len"] != "1024" {
		t.Errorf("sharegpt record workload %+v", sg)
	}
}

// TestImportedSettingsAbsent: no imported record states a setting its file does not record
// (ignore_eos, temperature, seed), and every one says which tool and version semantics it was
// read with.
func TestImportedSettingsAbsent(t *testing.T) {
	paths, err := filepath.Glob(fixtures + "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if strings.HasSuffix(p, ".source") {
			continue
		}
		rs, err := ImportAll(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		for i, r := range rs {
			if r.NCCL != nil {
				continue
			}
			w := r.Metadata.Workload
			if w.IgnoreEOS != nil || w.Temperature != nil || w.TemperatureServerDefault {
				t.Errorf("%s #%d: ignore_eos %v temperature %v: no such file records them", p, i+1, w.IgnoreEOS, w.Temperature)
			}
			if r.Metadata.Seed != nil && r.Metadata.SourceFormat != FormatAIPerf {
				t.Errorf("%s #%d: seed %d: the file records none", p, i+1, *r.Metadata.Seed)
			}
			s := r.Metadata.Semantics
			if s == nil || s.Tool == "" || s.Version == "" || s.Basis == "" || s.E2EEnd == "" || s.InputTokens == "" {
				t.Errorf("%s #%d: semantics %+v: want tool, version, basis and definitions", p, i+1, s)
			}
		}
	}
	// The seed AIPerf does record is kept.
	r, err := ImportFile(fixtures + "profile_export_aiperf.json")
	if err != nil || r.Metadata.Seed == nil || *r.Metadata.Seed != 0 {
		t.Errorf("AIPerf random_seed 0: seed %v (%v)", r.Metadata.Seed, err)
	}
}

// TestToolDefinitions pins each tool's definitions as read from its source (docs/metrics.md).
func TestToolDefinitions(t *testing.T) {
	for _, c := range []struct {
		file                          string
		tool, in, out, itl, e2e, peak string
	}{
		{"vllm-bench-serve-v0.25.1.json", "vllm bench serve", DefServerUsageElseDataset, DefServerUsageElseRetokenized, DefChoicesChunks, DefLastChoicesChunk, DefPeakBusiestSecond},
		{"vllm-console-summary.log", "vllm bench serve", DefServerUsageElseDataset, DefServerUsageElseRetokenized, DefChoicesChunks, DefLastChoicesChunk, ""},
		{"sglang-bench-serving-few-keys.jsonl", "sglang.bench_serving", DefDataset, DefServerUsage, DefPerTokenSplit, DefLastLine, ""},
		{"sglang-console-summary.log", "sglang.bench_serving", DefDataset, DefServerUsage, DefPerTokenSplit, DefLastLine, ""},
		{"profile_export_aiperf.json", "aiperf", DefClientTokenizer, DefClientTokenizer, DefContentEvents, DefLastContentEvent, ""},
	} {
		r, err := ImportFile(fixtures + c.file)
		if err != nil {
			t.Fatal(err)
		}
		s := r.Metadata.Semantics
		if s.Tool != c.tool || s.InputTokens != c.in || s.OutputTokens != c.out || s.ITL != c.itl || s.E2EEnd != c.e2e || s.PeakConcurrency != c.peak {
			t.Errorf("%s: semantics %+v", c.file, s)
		}
	}
	// SGLang's OpenAI-compatible backends count the requested length, not the tokens.
	if s := sglangSemantics("vllm"); s.OutputTokens != DefRequested || s.ITL != DefTextChunks {
		t.Errorf("sglang backend vllm: %+v", s)
	}
}

// TestVLLMPeakByVersion: vLLM's max_concurrent_requests is filed by the definition of the
// version that wrote it: the busiest second up to 0.28 (inferred when it exceeds the
// concurrency cap, or from --tool-version), the exact peak after; unknown: kept under vLLM's name.
func TestVLLMPeakByVersion(t *testing.T) {
	r, err := ImportFile(fixtures + "vllm-bench-serve-v0.25.1.json")
	if err != nil {
		t.Fatal(err)
	}
	m := r.Metrics()
	if m["max_concurrent_requests_1s"] != 6 || has(r.Missing, "max_concurrent_requests") == false || !strings.HasPrefix(r.Metadata.Semantics.Basis, "inferred") {
		t.Errorf("0.25.1 file: %v, missing %v, semantics %+v", m["max_concurrent_requests_1s"], r.Missing, r.Metadata.Semantics)
	}
	r, err = ImportFileWith(fixtures+"vllm-bench-serve-v0.25.1.json", ImportOptions{ToolVersion: "0.25.1"})
	if err != nil || r.Metrics()["max_concurrent_requests_1s"] != 6 || r.Metadata.Semantics.Version != "0.25.1" || r.Metadata.Semantics.Basis != "given with --tool-version" {
		t.Errorf("--tool-version 0.25.1: %+v (%v)", r.Metadata.Semantics, err)
	}
	// A value within the cap tells nothing: the version decides.
	doc := []byte(`{"backend": "openai", "model_id": "m", "max_concurrency": 8, "completed": 10, "failed": 0, "duration": 1, "output_throughput": 5, "max_concurrent_requests": 8}`)
	for _, c := range []struct {
		version, key string
	}{{"", "vllm_max_concurrent_requests"}, {"0.28.0", "max_concurrent_requests_1s"}, {"0.29.0", "max_concurrent_requests"}, {"main", "max_concurrent_requests"}} {
		rs, err := ImportWith(doc, "r.json", ImportOptions{ToolVersion: c.version})
		if err != nil {
			t.Fatal(err)
		}
		m := rs[0].Metrics()
		if m[c.key] != 8 {
			t.Errorf("version %q: %s = %v (metrics %v)", c.version, c.key, m[c.key], m)
		}
		for _, other := range []string{"vllm_max_concurrent_requests", "max_concurrent_requests_1s", "max_concurrent_requests"} {
			if _, ok := m[other]; ok && other != c.key {
				t.Errorf("version %q: also %s", c.version, other)
			}
		}
	}
}

// TestPeakConcurrencyDefinitions: three sequential 100 ms requests in one second (vLLM #56653):
// the exact peak is 1, the busiest second 3; a failed request counts only in peak_in_flight.
func TestPeakConcurrencyDefinitions(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	recs := []RequestRecord{
		{Start: 0, TTFT: ms(10), Latency: ms(100), OutputTokens: 1, Success: true},
		{Start: ms(100), TTFT: ms(10), Latency: ms(100), OutputTokens: 1, Success: true},
		{Start: ms(200), TTFT: ms(10), Latency: ms(100), OutputTokens: 1, Success: true},
		{Start: ms(150), Latency: ms(20), Err: "boom"},
	}
	r := ComputeMetrics(recs, time.Second, nil)
	if r.MaxConcurrentRequests != 1 || r.MaxConcurrentRequests1s != 3 || r.PeakInFlight != 2 {
		t.Errorf("max_concurrent_requests %d, _1s %d, peak_in_flight %d; want 1, 3, 2", r.MaxConcurrentRequests, r.MaxConcurrentRequests1s, r.PeakInFlight)
	}
}

// TestOlderReckonResult: a reckon result written before semantics were recorded has the
// busiest-second figure under max_concurrent_requests and no max_concurrent_requests_1s key:
// it is read as max_concurrent_requests_1s, and the exact peak is missing, never 0.
func TestOlderReckonResult(t *testing.T) {
	doc := `{"schema": "reckon.result/v1", "metadata": {"seed": 1, "workload": {"request_rate": 0, "ignore_eos": true, "temperature": 0}, "tool": "reckon", "tool_version": "0.9", "source_format": "reckon"},
	"duration": 1, "completed": 4, "failed": 0, "max_concurrent_requests": 5, "peak_in_flight": 4}`
	p := filepath.Join(t.TempDir(), "old.json")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ImportFile(p)
	if err != nil {
		t.Fatal(err)
	}
	m := r.Metrics()
	if m["max_concurrent_requests_1s"] != 5 || !has(r.Missing, "max_concurrent_requests") || r.Metadata.Semantics.PeakConcurrency != DefPeakBusiestSecond {
		t.Errorf("metrics %v missing %v semantics %+v", m, r.Missing, r.Metadata.Semantics)
	}
	if _, ok := m["mean_ttft_ms"]; ok {
		t.Errorf("mean_ttft_ms absent from the file but reported: %v", m["mean_ttft_ms"])
	}
	if w := r.Metadata.Workload; w.IgnoreEOS == nil || !*w.IgnoreEOS || w.Temperature == nil || r.Metadata.Seed == nil || *r.Metadata.Seed != 1 {
		t.Errorf("recorded settings lost: %+v", w)
	}
}

// TestDatasetKind: the same dataset named by each tool normalises to one name.
func TestDatasetKind(t *testing.T) {
	for in, want := range map[string]string{
		"synthetic(in=256,out=128,range=0,prefix=0)": "random", "random": "random", "random-ids": "random", "RANDOM": "random",
		"sharegpt": "sharegpt", "/data/ShareGPT_V3_unfiltered_cleaned_split.json": "sharegpt", "fixtures/datasets/chat.jsonl": "chat.jsonl", "": "",
	} {
		if got := DatasetKind(in); got != want {
			t.Errorf("DatasetKind(%q) = %q, want %q", in, got, want)
		}
	}
}
