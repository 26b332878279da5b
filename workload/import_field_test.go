package workload

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// Tests on result files from the field (fixtures/results/*.source say where each came from).

func warnings(r *Result) string { return strings.Join(r.Warnings, "\n") }

func TestImportVLLMAllRequestsFailed(t *testing.T) {
	r, err := ImportFile(fixtures + "vllm-bench-serve-all-failed-v0.25.1.json")
	if err != nil {
		t.Fatal(err)
	}
	m := r.Metrics()
	if m["completed"] != 0 || m["failed"] != 8 || m["request_throughput"] != 0 {
		t.Errorf("counts: %v", m)
	}
	// vLLM writes 0.0 for the statistics of an empty list: not a latency of 0 ms.
	for _, k := range []string{"mean_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "std_itl_ms", "max_output_tokens_per_s"} {
		if v, ok := m[k]; ok || !has(r.Missing, k) {
			t.Errorf("%s = %v, should be missing (missing %v)", k, v, r.Missing)
		}
	}
	if !strings.Contains(warnings(r), "no request completed (completed = 0, failed = 8)") {
		t.Errorf("warnings %v", r.Warnings)
	}
	// The same keys with real values are kept.
	ok, err := ImportFile(fixtures + "vllm-bench-serve-v0.25.1.json")
	if err != nil || ok.Metrics()["mean_ttft_ms"] == 0 || strings.Contains(warnings(ok), "no request completed") {
		t.Errorf("a good run lost its latencies: %v %v", err, ok.Warnings)
	}
}

func TestImportAllZeroLatencyGroupIsMissing(t *testing.T) {
	// Every output one token long: vLLM writes 0 for all TPOT statistics.
	data := []byte(`{"backend": "vllm", "completed": 5, "failed": 0, "duration": 1.0, "output_throughput": 5.0,
		"mean_ttft_ms": 12.0, "median_ttft_ms": 11.0, "std_ttft_ms": 0.0, "p99_ttft_ms": 20.0,
		"mean_tpot_ms": 0.0, "median_tpot_ms": 0.0, "std_tpot_ms": 0.0, "p99_tpot_ms": 0.0}`)
	rs, err := Import(data, "r.json")
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	m := r.Metrics()
	if _, ok := m["mean_tpot_ms"]; ok || !has(r.Missing, "p99_tpot_ms") {
		t.Errorf("all-zero TPOT kept: %v", m)
	}
	// A group with one non-zero statistic (std 0 is legitimate) is kept.
	if m["mean_ttft_ms"] != 12 || m["std_ttft_ms"] != 0 || has(r.Missing, "std_ttft_ms") {
		t.Errorf("TTFT damaged: %v missing %v", m, r.Missing)
	}
	if !strings.Contains(warnings(r), "every TPOT statistic is exactly 0") {
		t.Errorf("warnings %v", r.Warnings)
	}
}

func TestImportVLLMSweepSummaryArray(t *testing.T) {
	rs, err := ImportAll(fixtures + "vllm-bench-sweep-summary-v0.25.1.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d results, want one per array element (2)", len(rs))
	}
	near(t, "run 0 output_throughput", rs[0].OutputThroughput, 93.74767963046673)
	near(t, "run 1 p99_e2el_ms", rs[1].P99E2ELMs, 169.63662419613684)
	if rs[1].Extra["run_number"] != 1 || rs[0].Metadata.Workload.MaxConcurrency != 2 || rs[0].Metadata.Labels["backend"] != "openai" {
		t.Errorf("run metadata: %+v extra %v", rs[1].Metadata, rs[1].Extra)
	}
	// An array of anything else is still refused, naming the element.
	_, err = Import([]byte(`[{"output_throughput": 1.0}, 3]`), "x.json")
	if err == nil || !strings.Contains(err.Error(), "element 1") {
		t.Errorf("mixed array: %v", err)
	}
	_, err = Import([]byte(`[{"output_throughput": 1.0}, {"foo": 1}]`), "x.json")
	if err == nil || !strings.Contains(err.Error(), "element 1") {
		t.Errorf("unknown element: %v", err)
	}
}

func TestImportPercentileLists(t *testing.T) {
	data := []byte(`{"backend": "vllm", "completed": 4, "duration": 2.0, "output_throughput": 10.0, "p99_ttft_ms": 31.0,
		"percentiles_ttft_ms": [[50, 10.0], [99, 30.0], [99.9, 40.0]], "percentiles_itl_ms": {"95": 4.0}, "percentiles_tpot_ms": "x"}`)
	rs, err := Import(data, "r.json")
	if err != nil {
		t.Fatal(err)
	}
	m := rs[0].Metrics()
	// The flat key of the file wins over the list; other percentiles go to their pNN keys.
	if m["p99_ttft_ms"] != 31 || m["p50_ttft_ms"] != 10 || m["p99.9_ttft_ms"] != 40 || m["p95_itl_ms"] != 4 {
		t.Errorf("metrics %v", m)
	}
	if _, ok := m["median_ttft_ms"]; ok {
		t.Errorf("p50 must not be reported as the median")
	}
	if !strings.Contains(warnings(rs[0]), "percentiles_tpot_ms") {
		t.Errorf("a percentile list of the wrong shape must be reported: %v", rs[0].Warnings)
	}
}

func TestImportSGLangFewKeys(t *testing.T) {
	r, err := ImportFile(fixtures + "sglang-bench-serving-few-keys.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	m := r.Metrics()
	near(t, "median_ttft_ms", m["median_ttft_ms"], 10014.104524045251)
	near(t, "mean_e2el_ms", m["mean_e2el_ms"], 381236.82297268615)
	if m["completed"] != 10000 || r.Metadata.Workload.RequestRate != 0 || r.Metadata.Workload.OutputLen != 512 {
		t.Errorf("counts/workload: %v %+v", m, r.Metadata.Workload)
	}
	// Keys this SGLang version did not write are missing, never derived (no completed/duration).
	for _, k := range []string{"request_throughput", "mean_ttft_ms", "p99_itl_ms", "failed", "total_token_throughput"} {
		if _, ok := m[k]; ok || !has(r.Missing, k) {
			t.Errorf("%s should be missing", k)
		}
	}
}

func TestImportAIPerfPartial(t *testing.T) {
	r, err := ImportFile(fixtures + "profile_export_aiperf-partial.json")
	if err != nil {
		t.Fatal(err)
	}
	m := r.Metrics()
	near(t, "p99_ttft_ms", m["p99_ttft_ms"], 48.16844818)
	near(t, "p99_e2el_ms", m["p99_e2el_ms"], 6686.540937939999)
	near(t, "request_throughput", m["request_throughput"], 0.14968841618235815)
	if m["completed"] != 80 || r.Metadata.SourceFormat != FormatAIPerf {
		t.Errorf("completed %v format %s", m["completed"], r.Metadata.SourceFormat)
	}
	for _, k := range []string{"output_throughput", "duration", "mean_tpot_ms"} {
		if _, ok := m[k]; ok || !has(r.Missing, k) {
			t.Errorf("%s should be missing", k)
		}
	}
}

func TestImportNCCLSendRecvInPlaceNA(t *testing.T) {
	r, err := ImportFile(fixtures + "nccl-tests-sendrecv-inplace-na.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := r.NCCL
	if len(n.Rows) != 5 || !n.Validated || n.WrongTotal != 0 {
		t.Fatalf("nccl %+v", n)
	}
	row := n.Rows[3]
	if row.SizeBytes != 2048 || row.OutOfPlace.Wrong == nil || row.InPlace == nil || row.InPlace.Wrong != nil || row.InPlace.BusBWGBps != 0.07 {
		t.Errorf("row %+v in-place %+v", row, row.InPlace)
	}
	m := r.Metrics()
	if _, ok := m["avg_busbw_gbps"]; ok || m["wrong_total"] != 0 {
		t.Errorf("metrics %v", m)
	}
	if !strings.Contains(warnings(r), "N/A for some measurements") {
		t.Errorf("warnings %v", r.Warnings)
	}
}

func TestImportNCCLBroadcastNoValidation(t *testing.T) {
	r, err := ImportFile(fixtures + "nccl-tests-broadcast-no-validation.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := r.NCCL
	if len(n.Rows) != 1 || n.Validated {
		t.Fatalf("nccl %+v", n)
	}
	row := n.Rows[0]
	// Header: size count type root | time algbw busbw error: root, no redop.
	if row.Root == nil || *row.Root != 0 || row.RedOp != "" || row.OutOfPlace.TimeUs != 45.82 || row.InPlace.TimeUs != 38.17 || row.OutOfPlace.Error != nil {
		t.Errorf("row %+v", row)
	}
	if r.Metadata.Labels["nccl_version"] != "2.9.6+cuda11.2" {
		t.Errorf("labels %v", r.Metadata.Labels)
	}
	if _, ok := r.Metrics()["wrong_total"]; ok || !strings.Contains(warnings(r), "-c 0") {
		t.Errorf("unvalidated run must not report wrong_total: %v", r.Warnings)
	}
}

func TestImportNCCLWithoutHashes(t *testing.T) {
	r, err := ImportFile(fixtures + "nccl-tests-allgather-no-hash.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := r.NCCL
	if len(n.Rows) != 1 || n.AvgBusBWGBps != 128.942 || n.OutOfBounds != 2 {
		t.Fatalf("nccl %+v", n)
	}
	if n.Rows[0].OutOfPlace.Error == nil || *n.Rows[0].OutOfPlace.Error != 1 || n.Rows[0].InPlace.BusBWGBps != 128.84 {
		t.Errorf("row %+v", n.Rows[0])
	}
	if !strings.Contains(warnings(r), "out-of-bounds values: 2") || has(r.Missing, "avg_busbw_gbps") {
		t.Errorf("warnings %v missing %v", r.Warnings, r.Missing)
	}
}

func TestImportNCCLInPlaceOnly(t *testing.T) {
	r, err := ImportFile(fixtures + "mscclpp-reduce-scatter-in-place-only.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := r.NCCL
	if len(n.Rows) != 3 || n.OutOfBounds != 0 {
		t.Fatalf("nccl %+v", n)
	}
	row := n.Rows[0]
	// The banner puts in-place first: the only group is in-place, not out-of-place.
	if row.InPlace == nil || row.InPlace.BusBWGBps != 144.46 || row.InPlace.TimeUs != 76.21 || row.OutOfPlace.BusBWGBps != 0 {
		t.Errorf("row %+v in-place %+v", row, row.InPlace)
	}
	if r.Metrics()["max_busbw_gbps"] != 162.23 || !strings.Contains(warnings(r), "only in-place") {
		t.Errorf("metrics %v warnings %v", r.Metrics(), r.Warnings)
	}
}

func TestImportNCCLLauncherTagsNoHeader(t *testing.T) {
	r, err := ImportFile(fixtures + "nccl-tests-launcher-tags.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := r.NCCL
	if len(n.Rows) != 10 {
		t.Fatalf("%d rows, want 10 (the first line is the tail of a row)", len(n.Rows))
	}
	row := n.Rows[0]
	if row.SizeBytes != 1048576 || row.OutOfPlace.TimeUs != 1626.5 || row.InPlace.BusBWGBps != 0.87 || *row.Root != -1 {
		t.Errorf("row %+v in-place %+v", row, row.InPlace)
	}
	if !strings.Contains(warnings(r), "no table header") {
		t.Errorf("warnings %v", r.Warnings)
	}
}

func TestImportNCCLTwoRunsAndEmptyRedop(t *testing.T) {
	rs, err := ImportAll(fixtures + "nccl-tests-two-runs-alltoall.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d results, want one per run (2)", len(rs))
	}
	a, b := rs[0].NCCL, rs[1].NCCL
	if len(a.Rows) != 2 || a.AvgBusBWGBps != 4.32178 || a.Rows[1].RedOp != "sum" || a.Rows[1].OutOfPlace.TimeUs != 244833 {
		t.Errorf("run 1: %+v", a)
	}
	// alltoall leaves redop empty: the columns after it shift left.
	if len(b.Rows) != 2 || b.AvgBusBWGBps != 0.507636 || b.Rows[0].Count != 1048576 || b.Rows[0].RedOp != "" ||
		b.Rows[0].OutOfPlace.TimeUs != 520935 || b.Rows[0].InPlace.AlgBWGBps != 0.52 || *b.Rows[0].InPlace.Error != 1 {
		t.Errorf("run 2: %+v %+v", b.Rows[0], b.Rows[0].InPlace)
	}
}

func TestImportNCCLVersionLine(t *testing.T) {
	r, err := ImportFile(fixtures + "nccl-tests-v2.20-gb10.txt")
	if err != nil {
		t.Fatal(err)
	}
	if r.Metadata.ToolVersion != "2.20.0" || r.NCCL.Collective != "all_reduce_perf" || len(r.NCCL.Rows) != 4 || r.NCCL.Rows[3].InPlace.BusBWGBps != 1.01 {
		t.Errorf("metadata %+v nccl %+v", r.Metadata, r.NCCL)
	}
}

func TestImportNCCLNonFiniteValues(t *testing.T) {
	text := `#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
           0             0     float     sum      -1     0.00    -nan    -nan      0     0.00    -nan    -nan      0
        1024           256     float     sum      -1    20.00    0.05    0.09      0    20.00    0.05    0.09      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : -nan
`
	rs, err := Import([]byte(text), "nccl.log")
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	if len(r.NCCL.Rows) != 1 || !has(r.Missing, "avg_busbw_gbps") || !strings.Contains(warnings(r), "row skipped") {
		t.Errorf("rows %+v missing %v warnings %v", r.NCCL.Rows, r.Missing, r.Warnings)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("result must stay encodable: %v", err)
	}
	// A footer value that is text, not a number, is an error naming the line.
	_, err = Import([]byte(strings.Replace(text, "-nan\n", "fast\n", 1)), "nccl.log")
	if err == nil || !strings.Contains(err.Error(), "line 5") {
		t.Errorf("bad footer: %v", err)
	}
}

func TestImportConsoleHashPrefixed(t *testing.T) {
	rs, err := ImportAll(fixtures + "vllm-console-hash-prefixed.log")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d results, want 2", len(rs))
	}
	a, b := rs[0].Metrics(), rs[1].Metrics()
	if a["p99_ttft_ms"] != 10999.46 || a["median_itl_ms"] != 68.15 || a["max_concurrency"] != 32 || b["mean_tpot_ms"] != 93.85 || b["duration"] != 198.68 {
		t.Errorf("run 1 %v run 2 %v", a, b)
	}
	if _, ok := a["mean_e2el_ms"]; ok {
		t.Errorf("E2EL was not printed but is reported")
	}
}

func TestImportConsoleZeroITLAndNegativeTPOT(t *testing.T) {
	rs, err := ImportAll(fixtures + "sglang-console-zero-itl.log")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d results, want 2", len(rs))
	}
	r := rs[0]
	m := r.Metrics()
	// "Mean/Median/P99 ITL (ms): 0.00": no sample, not a 0 ms latency; "Median TPOT: -0.00" is
	// not a latency either.
	for _, k := range []string{"mean_itl_ms", "p99_itl_ms", "median_tpot_ms"} {
		if _, ok := m[k]; ok || !has(r.Missing, k) {
			t.Errorf("%s = %v should be missing", k, m[k])
		}
	}
	if m["mean_tpot_ms"] != 1.76 || m["p99_tpot_ms"] != 28.33 || m["mean_e2el_ms"] != 2098.07 || r.Metadata.Workload.RequestRate != 2 {
		t.Errorf("metrics %v workload %+v", m, r.Metadata.Workload)
	}
	w := warnings(r)
	if !strings.Contains(w, "every ITL statistic is exactly 0") || !strings.Contains(w, "median_tpot_ms is negative") {
		t.Errorf("warnings %v", r.Warnings)
	}
}

func TestImportVLLMRampUpAndModelIDs(t *testing.T) {
	data := []byte(`{"date": "20250901-101010", "endpoint_type": "openai", "label": null, "model_ids": ["m-a", "m-b"],
		"tokenizer_id": "m-a", "num_prompts": 10, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": null,
		"ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 20,
		"rps_change_events": [{"rps": 1, "timestamp": "2025-09-01T10:10:10"}],
		"duration": 3.0, "completed": 10, "failed": 0, "request_throughput": 3.3, "output_throughput": 100.0,
		"mean_ttft_ms": 20.0, "median_ttft_ms": 19.0, "std_ttft_ms": 1.0, "p99_ttft_ms": 25.0}`)
	rs, err := Import(data, "r.json")
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	if r.Metadata.Model != "m-a,m-b" || r.Metadata.Labels["ramp_up_strategy"] != "linear" || r.Extra["ramp_up_end_rps"] != 20 {
		t.Errorf("metadata %+v extra %v", r.Metadata, r.Extra)
	}
	if strings.Contains(warnings(r), "unknown fields") {
		t.Errorf("vLLM's own keys reported as unknown: %v", r.Warnings)
	}
}

func TestImportNCCLMultiNodeInMarkdown(t *testing.T) {
	r, err := ImportFile(fixtures + "nccl-tests-multinode-h100-markdown.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := r.NCCL
	if len(n.Rows) != 31 || n.AvgBusBWGBps != 70.742 || !n.Validated || n.OutOfBounds != 0 || len(r.Warnings) != 0 {
		t.Fatalf("rows %d nccl %+v warnings %v", len(n.Rows), n, r.Warnings)
	}
	last := n.Rows[30]
	if last.SizeBytes != 8589934592 || last.Count != 2147483648 || last.OutOfPlace.TimeUs != 47535 || last.InPlace.BusBWGBps != 337.35 {
		t.Errorf("last row %+v in-place %+v", last, last.InPlace)
	}
	if r.Metrics()["max_busbw_gbps"] != 338.82 {
		t.Errorf("metrics %v", r.Metrics())
	}
}

func TestImportSGLangTraceRate(t *testing.T) {
	// Current bench_serving writes request_rate "trace" with --use-trace-timestamps.
	data := []byte(`{"backend": "sglang-oai", "dataset_name": "mooncake", "request_rate": "trace", "max_concurrency": 64,
		"duration": 10.0, "completed": 100, "request_throughput": 10.0, "output_throughput": 200.0, "total_throughput": 300.0,
		"mean_e2e_latency_ms": 900.0, "mean_ttft_ms": 50.0, "accept_length": null, "output_throughput_retokenized": 199.0}`)
	rs, err := Import(data, "r.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	if r.Metadata.Labels["request_rate"] != "trace" || !strings.Contains(warnings(r), `"trace"`) {
		t.Errorf("labels %v warnings %v", r.Metadata.Labels, r.Warnings)
	}
	if strings.Contains(warnings(r), "unknown fields") || !has(r.Missing, "spec_accept_length") || r.TotalTokenThroughput != 300 {
		t.Errorf("warnings %v missing %v", r.Warnings, r.Missing)
	}
	// Any other text is still reported as a bad rate.
	rs, err = Import([]byte(strings.Replace(string(data), `"trace"`, `"fast"`, 1)), "r.jsonl")
	if err != nil || !strings.Contains(warnings(rs[0]), "expected a number or Infinity") {
		t.Errorf("bad rate: %v %v", err, rs[0].Warnings)
	}
}

func TestImportNCCLSrunLabels(t *testing.T) {
	// srun --label puts "<task>: " in front of every line.
	text := `0: #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
0:      1048576        262144     float     sum      -1    28.15   37.25   65.19      0    27.52   38.10   66.67      0
0: # Out of bounds values : 0 OK
0: # Avg bus bandwidth    : 65.9
`
	rs, err := Import([]byte(text), "slurm.out")
	if err != nil {
		t.Fatal(err)
	}
	n := rs[0].NCCL
	if len(rs) != 1 || len(n.Rows) != 1 || n.Rows[0].InPlace.BusBWGBps != 66.67 || n.AvgBusBWGBps != 65.9 || n.OutOfBounds != 0 {
		t.Errorf("results %d nccl %+v", len(rs), n)
	}
}

func TestImportNCCLConcatenatedRuns(t *testing.T) {
	// Two real outputs appended to one log: one result each, each with its own version line.
	a, errA := os.ReadFile(fixtures + "nccl-tests-v2.20-gb10.txt")
	b, errB := os.ReadFile(fixtures + "nccl-tests-multinode-h100-markdown.txt")
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	rs, err := Import(append(append(a, "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.6\n"...), b...), "all.log")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || len(rs[0].NCCL.Rows) != 4 || len(rs[1].NCCL.Rows) != 31 {
		t.Fatalf("%d results", len(rs))
	}
	if rs[0].Metadata.ToolVersion != "2.20.0" || rs[0].NCCL.AvgBusBWGBps != 0.6 || rs[1].NCCL.AvgBusBWGBps != 70.742 || rs[1].Metadata.ToolVersion != "" {
		t.Errorf("run 1 %+v run 2 %+v", rs[0].Metadata, rs[1].NCCL.Collective)
	}
}
