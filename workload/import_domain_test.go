package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 25, item 3: every importer checks counts and durations against their ranges, and the
// error names the file, the record (line, element or row) and the field.
func TestImportRangesNameFileRecordField(t *testing.T) {
	sglangOK := `{"backend": "sglang", "dataset_name": "random", "request_rate": 1.0, "completed": 3, "duration": 2.0, "output_throughput": 5.0, "mean_e2e_latency_ms": 9.0}`
	for _, c := range []struct {
		name, file, body string
		want             []string // every one must be in the error
	}{
		{"vllm completed 1e300", "v.json", `{"completed": 1e300, "duration": 1.0, "output_throughput": 5.0}`,
			[]string{"v.json", "completed", "1e+300"}},
		{"vllm negative failed", "v.json", `{"completed": 3, "failed": -2, "output_throughput": 5.0}`,
			[]string{"failed", "negative"}},
		{"vllm fractional completed", "v.json", `{"completed": 2.5, "output_throughput": 5.0}`,
			[]string{"completed", "whole number"}},
		{"vllm negative duration", "v.json", `{"completed": 3, "duration": -1.0, "output_throughput": 5.0}`,
			[]string{"duration", "negative"}},
		{"vllm absurd duration", "v.json", `{"completed": 3, "duration": 1e12, "output_throughput": 5.0}`,
			[]string{"duration", "more than"}},
		{"vllm negative throughput", "v.json", `{"completed": 3, "output_throughput": -5.0}`,
			[]string{"output_throughput", "negative"}},
		{"vllm huge throughput", "v.json", `{"completed": 3, "output_throughput": 1.7e308}`,
			[]string{"output_throughput", "outside the range"}},
		{"vllm num_prompts 1e300", "v.json", `{"completed": 3, "output_throughput": 5.0, "num_prompts": 1e300}`,
			[]string{"num_prompts"}},
		{"vllm negative rate", "v.json", `{"completed": 3, "output_throughput": 5.0, "request_rate": -3}`,
			[]string{"request_rate", "negative"}},
		{"vllm input_lens element", "v.json", `{"completed": 2, "output_throughput": 5.0, "input_lens": [10, 1e300]}`,
			[]string{"input_lens[1]"}},
		{"vllm huge extra", "v.json", `{"completed": 2, "output_throughput": 5.0, "rtfx": 1e300}`,
			[]string{"rtfx"}},
		{"sglang line 2", "s.jsonl", sglangOK + "\n" + strings.Replace(sglangOK, `"completed": 3`, `"completed": 1e300`, 1),
			[]string{"s.jsonl", "line 2", "completed"}},
		{"sglang negative input len", "s.jsonl", sglangOK + "\n" + strings.Replace(sglangOK, `"request_rate"`, `"random_input_len": -5, "random_range_ratio": 1, "request_rate"`, 1),
			[]string{"line 2", "random_input_len", "negative"}},
		{"array element", "summary.json", `[{"completed": 3, "output_throughput": 5.0}, {"completed": -3, "output_throughput": 5.0}]`,
			[]string{"element 1", "completed"}},
		{"aiperf request_count", "profile_export_aiperf.json", `{"request_count": {"unit": "requests", "avg": 1e300}, "request_throughput": {"unit": "requests/sec", "avg": 1.0}}`,
			[]string{"request_count", "1e+300"}},
		{"aiperf negative duration", "profile_export_aiperf.json", `{"benchmark_duration": {"unit": "sec", "avg": -4}, "request_throughput": {"unit": "requests/sec", "avg": 1.0}}`,
			[]string{"benchmark_duration", "negative"}},
		{"aiperf concurrency", "profile_export_aiperf.json", `{"input_config": {"loadgen": {"concurrency": 1e300}}, "request_throughput": {"unit": "requests/sec", "avg": 1.0}}`,
			[]string{"input_config.loadgen.concurrency"}},
		{"console completed", "bench.log", "============ Serving Benchmark Result ============\nSuccessful requests:                     1e300\nBenchmark duration (s):                  10.0\n==================================================\n",
			[]string{"bench.log", "line 2", "Successful requests"}},
		{"console negative duration", "bench.log", "============ Serving Benchmark Result ============\nSuccessful requests:                     5\nBenchmark duration (s):                  -10.0\n==================================================\n",
			[]string{"line 3", "Benchmark duration", "negative"}},
		{"nccl json nwrong", "n.json", `{"results": [{"size": 8, "count": 2, "out_of_place": {"time": 1, "alg_bw": 1, "bus_bw": 1, "nwrong": 1e300}}], "average_bus_bandwidth": {"bandwidth": 1}}`,
			[]string{"results[0].out_of_place.nwrong"}},
		{"nccl json size", "n.json", `{"results": [{"size": -8, "count": 2}], "average_bus_bandwidth": {"bandwidth": 1}}`,
			[]string{"results[0].size", "negative"}},
		{"nccl json bandwidth", "n.json", `{"results": [], "average_bus_bandwidth": {"bandwidth": -1}}`,
			[]string{"average_bus_bandwidth.bandwidth"}},
		{"nccl text avg", "nccl.txt", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n         8             2     float     sum      -1    10.0    0.00    0.00      0    10.0    0.00    0.00      0\n# Avg bus bandwidth    : 1e300\n",
			[]string{"nccl.txt", "line 3", "Avg bus bandwidth"}},
		{"nccl text negative time", "nccl.txt", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n         8             2     float     sum      -1   -10.0    0.00    0.00      0    10.0    0.00    0.00      0\n# Avg bus bandwidth    : 1\n",
			[]string{"row 1", "time"}},
		{"reckon negative", "r.json", `{"schema": "` + ResultSchema + `", "completed": -4, "output_throughput": 5.0}`,
			[]string{"r.json", "completed", "negative"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), c.file)
			if err := os.WriteFile(path, []byte(c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			rs, err := ImportAll(path)
			if err == nil {
				t.Fatalf("imported: %+v", rs[0])
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// Values at the edge of their ranges still import.
func TestImportRangesKeepHonestValues(t *testing.T) {
	rs, err := Import([]byte(`{"completed": 0, "failed": 1000000, "duration": 86400.5, "output_throughput": 0, "total_output_tokens": 999999999999, "request_rate": "inf"}`), "v.json")
	if err != nil {
		t.Fatal(err)
	}
	if r := rs[0]; r.Failed != 1000000 || r.TotalOutputTokens != 999999999999 || r.Duration != 86400.5 {
		t.Errorf("values changed: %+v", r)
	}
}

// A file larger than MaxImportBytes is refused before it is read, and a file with more than
// MaxImportRecords results after that many.
func TestImportLimits(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.jsonl")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxImportBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := ImportAll(big); err == nil || !strings.Contains(err.Error(), "larger than the 256 MiB") {
		t.Errorf("oversized file: %v", err)
	}
	line := `{"backend": "sglang", "dataset_name": "random", "request_rate": 1.0, "completed": 3, "duration": 2.0, "output_throughput": 5.0}` + "\n"
	many := filepath.Join(dir, "many.jsonl")
	if err := os.WriteFile(many, []byte(strings.Repeat(line, MaxImportRecords+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ImportAll(many); err == nil || !strings.Contains(err.Error(), "line 10001: more than 10000 results") {
		t.Errorf("too many records: %v", err)
	}
}
