package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fixtures = "../fixtures/results/"

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestEveryFixtureHasASource(t *testing.T) {
	files, _ := filepath.Glob(fixtures + "*")
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".source") {
			continue
		}
		n++
		src, err := os.ReadFile(f + ".source")
		if err != nil || !strings.Contains(string(src), "https://") {
			t.Errorf("%s: no .source sidecar with the URL it came from", f)
		}
		if _, err := ImportFile(f); err != nil {
			t.Errorf("%s does not import: %v", f, err)
		}
	}
	if n < 6 {
		t.Errorf("only %d importer fixtures", n)
	}
}

func TestImportVLLMCurrent(t *testing.T) {
	r, err := ImportFile(fixtures + "vllm-bench-serve-v0.25.1.json")
	if err != nil {
		t.Fatal(err)
	}
	m := r.Metrics()
	if r.Metadata.SourceFormat != FormatVLLM || r.Metadata.Model != "facebook/opt-125m" || r.Metadata.Workload.RequestRate != 0 || r.Metadata.Workload.MaxConcurrency != 2 {
		t.Errorf("metadata = %+v", r.Metadata)
	}
	near(t, "output_throughput", m["output_throughput"], 93.74767963046673)
	near(t, "p99_e2el_ms", m["p99_e2el_ms"], 876.8009717071254)
	// 6 requests "in flight" with max_concurrency 2: the busiest-second figure (vLLM <= 0.28).
	if m["completed"] != 8 || m["failed"] != 0 || m["max_concurrent_requests_1s"] != 6 {
		t.Errorf("counts: %v", m)
	}
	// request_goodput is null (no --goodput), p90 was not asked for: missing, not zero.
	for _, k := range []string{"request_goodput", "p90_ttft_ms", "spec_accept_length"} {
		if _, ok := m[k]; ok || !has(r.Missing, k) {
			t.Errorf("%s should be missing (metrics %v, missing %v)", k, m[k], r.Missing)
		}
	}
	// Keys vLLM's schema does not have are kept and reported.
	if r.Extra["max_num_seqs"] != 4 || !strings.Contains(strings.Join(r.Warnings, "\n"), "max_num_seqs") {
		t.Errorf("unknown key not kept/reported: extra %v warnings %v", r.Extra, r.Warnings)
	}
}

func TestImportVLLMSpeculative(t *testing.T) {
	r, err := ImportFile(fixtures + "vllm-bench-serve-speculative.json")
	if err != nil {
		t.Fatal(err)
	}
	m := r.Metrics()
	near(t, "spec_accept_length", m["spec_accept_length"], 3.161111111111111)
	near(t, "acceptance pos1", m["spec_decode_acceptance_rate_pos1"], 0.7166666666666667)
	if _, ok := m["mean_e2el_ms"]; ok {
		t.Errorf("e2el was not in the file but is reported")
	}
	if len(r.Warnings) != 0 {
		t.Errorf("a plain current vLLM file should import without warnings: %v", r.Warnings)
	}
}

func TestImportVLLMLegacyAppend(t *testing.T) {
	rs, err := ImportAll(fixtures + "vllm-legacy-append.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Fatalf("%d results, want 3 (one per line)", len(rs))
	}
	if rs[0].Metadata.Workload.RequestRate != 1 || rs[2].Metadata.Workload.RequestRate != 0 {
		t.Errorf("request rates %v %v, want 1 and inf (0)", rs[0].Metadata.Workload.RequestRate, rs[2].Metadata.Workload.RequestRate)
	}
	if rs[0].Metadata.Labels["framework"] != "vllm" {
		t.Errorf("--metadata label lost: %v", rs[0].Metadata.Labels)
	}
	w := strings.Join(rs[0].Warnings, "\n")
	if !strings.Contains(w, `"request_goodput:"`) {
		t.Errorf("legacy key not reported: %v", rs[0].Warnings)
	}
	// Old files have no "failed" key: missing, not 0.
	if !has(rs[0].Missing, "failed") {
		t.Errorf("failed should be missing in a legacy file")
	}
	near(t, "p99_itl_ms", rs[1].P99ITLMs, 34.963821724522795)
	last, err := ImportFile(fixtures + "vllm-legacy-append.jsonl")
	if err != nil || last.Completed != 1015 || !strings.Contains(strings.Join(last.Warnings, "\n"), "holds 3 results") {
		t.Errorf("ImportFile should give the last line with a warning: %v %+v", err, last)
	}
}

func TestImportVLLMGoodputLegacyValue(t *testing.T) {
	data := []byte(`{"date": "20240101-000000", "backend": "vllm", "completed": 10, "duration": 2.0, "request_throughput": 5.0, "request_goodput:": 3.5, "output_throughput": 100.0, "mean_ttft_ms": 12.5}`)
	rs, err := Import(data, "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := rs[0].Metrics()["request_goodput"]; !ok || g != 3.5 {
		t.Errorf("request_goodput from legacy key = %v (%v)", g, ok)
	}
}

func TestImportSGLangWithInfinity(t *testing.T) {
	rs, err := ImportAll(fixtures + "sglang-bench-serving-offline.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 {
		t.Fatalf("%d results, want 4", len(rs))
	}
	r := rs[0]
	if r.Metadata.SourceFormat != FormatSGLang || r.Metadata.Workload.RequestRate != 0 || r.Metadata.Workload.InputLen != 0 || r.Metadata.Workload.InputLens.String() != "1..1024" || r.Metadata.Workload.Dataset != "random" {
		t.Errorf("metadata = %+v", r.Metadata)
	}
	m := r.Metrics()
	near(t, "mean_e2el_ms (from mean_e2e_latency_ms)", m["mean_e2el_ms"], 224918.79882259612)
	near(t, "median_itl_ms", m["median_itl_ms"], 159.01175909675658)
	if m["completed"] != 3000 || m["total_output_tokens"] != 1544818 {
		t.Errorf("counts %v", m)
	}
	for _, k := range []string{"failed", "mean_ttft_ms", "request_throughput"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s not in this (older) file but reported", k)
		}
	}
	if rs[3].Metadata.Workload.Dataset != "sharegpt" {
		t.Errorf("line 4 dataset %q", rs[3].Metadata.Workload.Dataset)
	}
}

func TestImportNonFiniteLiterals(t *testing.T) {
	// NaN as a metric (no successful request) and Infinity/NaN inside strings, which must stay.
	data := []byte(`{"backend": "sglang", "tag": "run NaN Infinity", "request_rate": Infinity, "completed": 0, "duration": 1.5, "mean_ttft_ms": NaN, "median_e2e_latency_ms": -Infinity, "output_throughput": 0.0, "accept_length": null}` + "\n")
	rs, err := Import(data, "x.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	if r.Metadata.Labels["tag"] != "run NaN Infinity" {
		t.Errorf("string content altered: %q", r.Metadata.Labels["tag"])
	}
	m := r.Metrics()
	if _, ok := m["mean_ttft_ms"]; ok {
		t.Errorf("NaN metric reported as %v", m["mean_ttft_ms"])
	}
	if _, ok := m["median_e2el_ms"]; ok {
		t.Errorf("-Infinity metric reported")
	}
	w := strings.Join(r.Warnings, "\n")
	if !strings.Contains(w, "mean_ttft_ms is NaN") || !strings.Contains(w, "median_e2e_latency_ms is -Infinity") {
		t.Errorf("non-finite values not reported: %v", r.Warnings)
	}
	if _, ok := m["spec_accept_length"]; ok {
		t.Errorf("null accept_length reported")
	}
}

func TestImportAIPerf(t *testing.T) {
	r, err := ImportFile(fixtures + "profile_export_aiperf.json")
	if err != nil {
		t.Fatal(err)
	}
	m := r.Metrics()
	if r.Metadata.SourceFormat != FormatAIPerf || r.Metadata.Model != "openai/gpt-oss-20b" || r.MaxConcurrency != 100 {
		t.Errorf("metadata %+v", r.Metadata)
	}
	near(t, "median_ttft_ms (p50)", m["median_ttft_ms"], 787.5439584999999)
	near(t, "p99_e2el_ms (request_latency.p99)", m["p99_e2el_ms"], 9381.628943169999)
	near(t, "duration (sec)", m["duration"], 15.196591969000002)
	if m["completed"] != 200 || m["total_output_tokens"] != 19370 || m["failed"] != 84 {
		t.Errorf("counts %v %v %v", m["completed"], m["total_output_tokens"], m["failed"])
	}
	if _, ok := m["p99_ttft_ms"]; ok {
		t.Errorf("time_to_first_token has no p99 in the file but p99_ttft_ms is reported")
	}
	if !strings.Contains(strings.Join(r.Warnings, "\n"), "cancelled") {
		t.Errorf("cancelled run not reported: %v", r.Warnings)
	}
}

func TestImportGenAIPerfUnitsAndNames(t *testing.T) {
	data := []byte(`{"time_to_first_token": {"unit": "ns", "avg": 25000000, "p50": 24000000, "p99": 40000000, "std": 1000000},
	 "inter_token_latency": {"unit": "ms", "avg": 7.5, "p99": 9.0},
	 "request_throughput": {"unit": "requests/sec", "avg": 12.0},
	 "output_token_throughput": {"unit": "tokens/sec", "avg": 900.0},
	 "output_sequence_length": {"unit": "tokens", "avg": 128, "p50": 128},
	 "input_config": {"model": ["m"], "concurrency": 8}}`)
	rs, err := Import(data, "profile_export_genai_perf.json")
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	m := r.Metrics()
	if r.Metadata.SourceFormat != FormatGenAI || r.MaxConcurrency != 8 {
		t.Errorf("format %q concurrency %d", r.Metadata.SourceFormat, r.MaxConcurrency)
	}
	near(t, "mean_ttft_ms from ns", m["mean_ttft_ms"], 25)
	near(t, "p99_ttft_ms from ns", m["p99_ttft_ms"], 40)
	// GenAI-Perf's inter_token_latency is vLLM's TPOT, not ITL.
	near(t, "mean_tpot_ms", m["mean_tpot_ms"], 7.5)
	if _, ok := m["mean_itl_ms"]; ok {
		t.Errorf("inter_token_latency must not become ITL")
	}
	near(t, "output_sequence_length_avg", m["output_sequence_length_avg"], 128)
}

func TestImportNCCLCurrentFormat(t *testing.T) {
	r, err := ImportFile(fixtures + "nccl-tests-gb200-nvl72.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := r.NCCL
	if n == nil || len(n.Rows) != 5 || n.AvgBusBWGBps != 745.53 || !n.Validated || n.WrongTotal != 0 || n.OutOfBounds != 0 {
		t.Fatalf("nccl = %+v", n)
	}
	row := n.Rows[3]
	if row.SizeBytes != 4294967296 || row.OutOfPlace.TimeUs != 10094 || row.OutOfPlace.BusBWGBps != 839.16 || row.InPlace.AlgBWGBps != 423.54 ||
		row.OutOfPlace.Wrong == nil || *row.OutOfPlace.Wrong != 0 || row.Root == nil || *row.Root != -1 || row.RedOp != "sum" {
		t.Errorf("row 4 = %+v in-place %+v", row, row.InPlace)
	}
	m := r.Metrics()
	if m["avg_busbw_gbps"] != 745.53 || m["max_busbw_gbps"] != 846.82 || m["wrong_total"] != 0 {
		t.Errorf("metrics %v", m)
	}
}

func TestImportNCCLOldFormat(t *testing.T) {
	r, err := ImportFile(fixtures + "nccl-tests-old-error-column.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := r.NCCL
	if len(n.Rows) != 12 || n.AvgBusBWGBps != 6.6972 || n.Rows[0].SizeBytes != 65536 || n.Rows[6].OutOfPlace.TimeUs != 120.1 || n.Rows[0].InPlace.BusBWGBps != 2.37 {
		t.Fatalf("nccl = %+v", n)
	}
	if n.Rows[0].OutOfPlace.Error == nil || n.Rows[0].OutOfPlace.Wrong != nil {
		t.Errorf("old error column must be kept as error, not #wrong")
	}
	if _, ok := r.Metrics()["wrong_total"]; ok {
		t.Errorf("wrong_total reported for a format without #wrong")
	}
}

func TestImportNCCLNAAndWrongAndTruncated(t *testing.T) {
	// Rows in the current format with validation off (N/A) and with wrong elements, behind mpirun
	// --tag-output prefixes, and no footer (a run cut short).
	text := `[1,0]<stdout>:#                                                              out-of-place                       in-place
[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
[1,0]<stdout>:#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
[1,0]<stdout>:     1048576        262144     float     sum      -1    28.15   37.25   65.19    N/A    27.52   38.10   66.67    N/A
[1,0]<stdout>:     2097152        524288     float     sum      -1    37.03   56.64   99.11      3    35.22   59.55  104.21      0
`
	rs, err := Import([]byte(text), "nccl.log")
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	n := r.NCCL
	if len(n.Rows) != 2 || n.Rows[0].OutOfPlace.Wrong != nil || n.Rows[1].OutOfPlace.Wrong == nil || n.WrongTotal != 3 {
		t.Fatalf("rows %+v wrong total %d", n.Rows, n.WrongTotal)
	}
	m := r.Metrics()
	if _, ok := m["avg_busbw_gbps"]; ok {
		t.Errorf("no Avg bus bandwidth line, yet avg_busbw_gbps = %v", m["avg_busbw_gbps"])
	}
	w := strings.Join(r.Warnings, "\n")
	if !strings.Contains(w, "3 wrong elements") || !strings.Contains(w, "Avg bus bandwidth") {
		t.Errorf("warnings %v", r.Warnings)
	}
	// A FAILED footer is reported.
	rs, err = Import([]byte(text+"# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 12.5 FAILED\n"), "nccl.log")
	if err != nil || rs[0].NCCL.AvgBusBWStatus != "FAILED" || rs[0].NCCL.AvgBusBWGBps != 12.5 {
		t.Errorf("footer: %v %+v", err, rs[0].NCCL)
	}
}

func TestImportRejectsGarbageClearly(t *testing.T) {
	cases := map[string]string{
		"":                            "empty",
		"hello world\n":               "unrecognised format",
		`{"foo": 1}`:                  "unrecognised JSON result",
		"{\"mean_ttft_ms\": 1}\n{bad": "line 2",
		`[1, 2]`:                      "JSON array",
		`{"mean_ttft_ms": "fast", "output_throughput": 1}`: "",
	}
	for in, want := range cases {
		rs, err := Import([]byte(in), "f.json")
		if want == "" {
			// Wrong type for a known metric: imported with a warning, the metric missing.
			if err != nil || len(rs[0].Warnings) == 0 || has(rs[0].Missing, "output_throughput") {
				t.Errorf("%q: err %v result %+v", in, err, rs)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Import(%q) error = %v, want %q", in, err, want)
		}
	}
	if _, err := ImportFile("/nonexistent/x.json"); err == nil {
		t.Errorf("missing file accepted")
	}
}

func TestReckonResultRoundTrip(t *testing.T) {
	r := ComputeMetrics(scripted(), 2e9, map[string]float64{"ttft": 120})
	r.Metadata.Config = "nccl"
	r.setMissing("spec_accept_length")
	path := filepath.Join(t.TempDir(), "sub", "r.json")
	if err := WriteResult(path, r); err != nil {
		t.Fatal(err)
	}
	back, err := ImportFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Metadata.SourceFormat != "" && back.Metadata.Config != "nccl" {
		t.Errorf("metadata lost: %+v", back.Metadata)
	}
	a, b := r.Metrics(), back.Metrics()
	if len(a) != len(b) {
		t.Errorf("metrics differ after round trip: %d vs %d", len(a), len(b))
	}
	for k, v := range a {
		if b[k] != v {
			t.Errorf("%s: %v became %v", k, v, b[k])
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestImportNCCLJSON(t *testing.T) {
	// The shape nccl-tests -J writes (keys as documented in its source).
	data := []byte(`{"results": [
	  {"size": 1048576, "count": 262144, "type": "float", "redop": "sum", "root": -1,
	   "out_of_place": {"time": 28.15, "alg_bw": 37.25, "bus_bw": 65.19, "nwrong": 0},
	   "in_place": {"time": 27.52, "alg_bw": 38.10, "bus_bw": 66.67, "nwrong": 2}}],
	 "out_of_bounds": {"count": 0, "okay": true},
	 "average_bus_bandwidth": {"bandwidth": 65.93, "okay": "unchecked"}}`)
	rs, err := Import(data, "nccl.json")
	if err != nil {
		t.Fatal(err)
	}
	n := rs[0].NCCL
	if rs[0].Metadata.SourceFormat != FormatNCCLJSON || len(n.Rows) != 1 || n.Rows[0].InPlace.BusBWGBps != 66.67 || n.WrongTotal != 2 || n.AvgBusBWGBps != 65.93 || n.AvgBusBWStatus != "unchecked" {
		t.Errorf("nccl json = %+v", n)
	}
	if _, err := Import([]byte(`{"results": [{"count": 1}], "average_bus_bandwidth": {}}`), "n.json"); err == nil || !strings.Contains(err.Error(), "results[0].size") {
		t.Errorf("row without size: %v", err)
	}
}

func TestImportPrintedSummaries(t *testing.T) {
	rs, err := ImportAll(fixtures + "sglang-console-summary.log")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d blocks, want 2", len(rs))
	}
	r := rs[1]
	m := r.Metrics()
	if r.Metadata.SourceFormat != FormatConsole || r.Metadata.Tool != "sglang.bench_serving" || r.Metadata.Workload.RequestRate != 4 {
		t.Errorf("metadata %+v", r.Metadata)
	}
	near(t, "median_e2el_ms", m["median_e2el_ms"], 594.76)
	near(t, "p99_ttft_ms", m["p99_ttft_ms"], 15249.17)
	near(t, "total_token_throughput", m["total_token_throughput"], 2100.12)
	if m["completed"] != 996 || m["input_throughput"] != 1282.66 {
		t.Errorf("metrics %v", m)
	}
	if _, ok := m["failed"]; ok {
		t.Errorf("SGLang prints no failed count, yet failed is reported")
	}

	v, err := ImportFile(fixtures + "vllm-console-summary.log")
	if err != nil {
		t.Fatal(err)
	}
	vm := v.Metrics()
	if v.Metadata.Workload.RequestRate != 10 || vm["completed"] != 300 || vm["p99_itl_ms"] != 34.21 {
		t.Errorf("vLLM summary: rate %v metrics %v", v.Metadata.Workload.RequestRate, vm)
	}
	if _, ok := vm["mean_e2el_ms"]; ok {
		t.Errorf("e2el not printed, yet reported")
	}
	if !strings.Contains(strings.Join(v.Warnings, "\n"), "rounded") {
		t.Errorf("rounding not reported: %v", v.Warnings)
	}
	if _, err := Import([]byte("============ Serving Benchmark Result ============\n==================================================\n"), "x.log"); err == nil {
		t.Errorf("an empty block was accepted")
	}
}
