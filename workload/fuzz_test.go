package workload

import (
	"encoding/json"
	"testing"
)

// Fuzz targets of the importers (issue 25, item 8): one per format, each seeded from that
// format's fixtures (testdata/fuzz/FuzzImport*). Whatever the file, an import never panics, and
// a result it returns holds only numbers inside their ranges and can be written back.
func fuzzImport(f *testing.F, name string) {
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := Import(data, name)
		if err != nil {
			return
		}
		if len(rs) == 0 {
			t.Fatal("no result and no error")
		}
		for i, r := range rs {
			if err := checkResult(r); err != nil {
				t.Fatalf("result %d out of range: %v", i, err)
			}
			if _, err := json.Marshal(r); err != nil {
				t.Fatalf("result %d cannot be written: %v", i, err)
			}
		}
	})
}

// FuzzImportVLLM fuzzes vllm bench serve JSON (and JSONL with --append-result).
func FuzzImportVLLM(f *testing.F) { fuzzImport(f, "vllm.json") }

// FuzzImportSGLang fuzzes SGLang bench_serving JSONL.
func FuzzImportSGLang(f *testing.F) { fuzzImport(f, "sglang.jsonl") }

// FuzzImportAIPerf fuzzes GenAI-Perf/AIPerf aggregate JSON.
func FuzzImportAIPerf(f *testing.F) { fuzzImport(f, "profile_export_aiperf.json") }

// FuzzImportConsole fuzzes the printed "Serving Benchmark Result" summaries.
func FuzzImportConsole(f *testing.F) { fuzzImport(f, "bench.log") }

// FuzzImportNCCL fuzzes nccl-tests text output and -J JSON.
func FuzzImportNCCL(f *testing.F) { fuzzImport(f, "nccl.txt") }
