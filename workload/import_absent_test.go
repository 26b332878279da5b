package workload

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// genuineZeros pins, per fixture, the metrics that are 0 because the source says 0 (a printed
// "0.00" bus bandwidth, "failed": 0, every throughput of a run in which no request completed).
// Any other 0 would be invented. A fixture added without an entry fails the test, so that its
// zeros get looked at.
var genuineZeros = map[string][]string{
	"mscclpp-reduce-scatter-in-place-only.txt":      {"wrong_total"},
	"nccl-tests-allgather-no-hash.txt":              {},
	"nccl-tests-broadcast-no-validation.txt":        {"max_busbw_gbps"}, // every row prints busbw 0.00
	"nccl-tests-gb200-nvl72.txt":                    {"wrong_total"},
	"nccl-tests-launcher-tags.txt":                  {"wrong_total"},
	"nccl-tests-multinode-h100-markdown.txt":        {"wrong_total"},
	"nccl-tests-old-error-column.txt":               {"max_rel_error"}, // the "error" column prints 0e+00
	"nccl-tests-sendrecv-inplace-na.txt":            {"wrong_total"},
	"nccl-tests-two-runs-alltoall.txt":              {},
	"nccl-tests-v2.20-gb10.txt":                     {"wrong_total"},
	"profile_export_aiperf-partial.json":            {},
	"profile_export_aiperf.json":                    {},
	"sglang-bench-serving-few-keys.jsonl":           {},
	"sglang-bench-serving-offline.jsonl":            {},
	"sglang-bench-serving-online-seven-rates.jsonl": {},
	"sglang-console-summary.log":                    {},
	"sglang-console-zero-itl.log":                   {},
	"vllm-bench-serve-all-failed-v0.25.1.json": {"completed", "output_throughput", "request_throughput",
		"rtfx", "total_input_tokens", "total_output_tokens", "total_token_throughput", "vllm_max_concurrent_requests"},
	"vllm-bench-serve-speculative.json":     {"failed", "rtfx"},
	"vllm-bench-serve-v0.25.1.json":         {"failed", "rtfx", "run_number"},
	"vllm-bench-sweep-summary-v0.25.1.json": {"failed", "rtfx", "run_number"},
	"vllm-console-hash-prefixed.log":        {},
	"vllm-console-summary.log":              {},
	"vllm-legacy-append.jsonl":              {},
}

// TestImportNeverInventsZero imports every fixture under fixtures/results with every importer
// it reaches (vLLM JSON and JSONL, sweep summaries, SGLang JSONL, AIPerf/GenAI-Perf, printed
// summaries of vLLM and SGLang, nccl-tests text) and checks, for every result of every file:
// a metric the source lacks is missing, left out of Metrics and written as null (never 0); the
// only zeros are the source's own; and reckon's JSON reads back with the same metrics.
func TestImportNeverInventsZero(t *testing.T) {
	files, err := filepath.Glob("../fixtures/results/*")
	if err != nil {
		t.Fatal(err)
	}
	formats := map[string]bool{}
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".source") {
			continue
		}
		base := filepath.Base(f)
		t.Run(base, func(t *testing.T) {
			want, pinned := genuineZeros[base]
			if !pinned {
				t.Fatalf("fixture %s has no genuineZeros entry: list the metrics that are 0 in the source", base)
			}
			rs, err := ImportAll(f)
			if err != nil {
				t.Fatal(err)
			}
			seen++
			zeros := map[string]bool{}
			for i, r := range rs {
				formats[r.Metadata.SourceFormat] = true
				m := r.Metrics()
				for _, k := range r.Missing {
					if _, ok := m[k]; ok {
						t.Errorf("result %d: %s is missing but in Metrics()", i+1, k)
					}
				}
				for k, v := range m {
					if v == 0 {
						zeros[k] = true
					}
				}
				data, err := json.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(data, &obj); err != nil {
					t.Fatal(err)
				}
				for _, k := range r.Missing {
					if v, ok := obj[k]; ok && string(v) != "null" {
						t.Errorf("result %d: missing metric %s written as %s, want null", i+1, k, v)
					}
				}
				if r.NCCL != nil {
					continue // nccl-tests results are re-read from their text, not from reckon's JSON
				}
				back, err := Import(data, "r.json")
				if err != nil {
					t.Fatalf("result %d: reckon JSON does not read back: %v", i+1, err)
				}
				if got := back[0].Metrics(); len(got) != len(m) {
					t.Errorf("result %d: %d metrics after a round trip, want %d", i+1, len(got), len(m))
				}
			}
			var got []string
			for k := range zeros {
				got = append(got, k)
			}
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("metrics reported as 0: %v; the source's own zeros are %v", got, want)
			}
		})
	}
	for _, f := range []string{FormatVLLM, FormatSGLang, FormatAIPerf, FormatNCCL} {
		if !formats[f] && seen > 0 {
			t.Errorf("no fixture exercised the %s importer", f)
		}
	}
}

// TestImportSevenRunsAreSevenTrials: the seven-run SGLang JSONL gives seven results, each
// labelled by its place and request rate, and the metrics old SGLang did not write
// (request_throughput, p99_ttft_ms, failed) are null, not 0.
func TestImportSevenRunsAreSevenTrials(t *testing.T) {
	rs, err := ImportAll("../fixtures/results/sglang-bench-serving-online-seven-rates.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 7 {
		t.Fatalf("%d results, want 7", len(rs))
	}
	wantRates := []string{"1", "2", "4", "8", "16", "4", "8"}
	for i, r := range rs {
		if run := r.Metadata.Labels["run"]; !strings.Contains(run, "request_rate="+wantRates[i]+" ") && !strings.HasSuffix(run, "request_rate="+wantRates[i]) {
			t.Errorf("result %d: run label %q, want request_rate=%s", i+1, run, wantRates[i])
		}
		var b bytes.Buffer
		if err := json.NewEncoder(&b).Encode(r); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"request_throughput", "p99_ttft_ms", "failed"} {
			if !strings.Contains(b.String(), `"`+k+`":null`) {
				t.Errorf("result %d: %s not null in %s", i+1, k, b.String()[:200])
			}
		}
	}
	if rs[0].OutputThroughput != 537.4142851849319 || rs[6].OutputThroughput != 1471.0864833760852 {
		t.Errorf("output throughputs %v, %v", rs[0].OutputThroughput, rs[6].OutputThroughput)
	}
}
