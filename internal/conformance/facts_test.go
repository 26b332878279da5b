package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/engine/profile"
	"github.com/reckon-ci/reckon/engine/vllm"
	"github.com/reckon-ci/reckon/wire/enginefacts"
)

// factVectors are the vectors behind wire/enginefacts: the names the engines' own sources use
// (kernels, architectures, trace files, config fields), read by the code that relies on them.
var factVectors = []vector{
	{"fixtures/conformance/facts/flashinfer_fusion_kernels_fb28d72.txt", checkFusionKernels},
	{"fixtures/conformance/facts/sglang_fusion_auto_enable_469c63e.txt", checkFusionAutoEnable},
	{"fixtures/conformance/facts/vllm_async_llm_worker_name.txt", checkFrontendTraceName},
	{"fixtures/conformance/facts/vllm_profiler_config_04b0229.txt", checkProfilerConfig},
}

func init() { vectors = append(vectors, factVectors...) }

// lines is a vector's non-empty lines.
func lines(t *testing.T, file string) []string {
	var out []string
	for _, l := range strings.Split(string(readFile(t, file)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// checkFusionKernels: every FlashInfer fusion kernel, named as torch demangles it (return type,
// namespace, template and parameters), is fused (never custom, never NCCL), and the fact lists
// exactly these kernels.
func checkFusionKernels(t *testing.T, file string) {
	names := lines(t, file)
	for _, n := range names {
		ns := "trtllm_allreduce_fusion"
		if strings.HasPrefix(n, "moe") {
			ns = "trtllm_moe_allreduce_fusion"
		}
		demangled := "void flashinfer::" + ns + "::" + n + "<__nv_bfloat16, 8, true>(flashinfer::" + ns + "::Params<__nv_bfloat16>)"
		if k := profile.Classify(demangled); k != profile.FusedAllReduce {
			t.Errorf("Classify(%q) = %v, want fused", demangled, k)
		}
	}
	if !slices.Equal(names, enginefacts.FlashInferFusionKernels.Values) {
		t.Errorf("FlashInfer declares %v, the fact lists %v", names, enginefacts.FlashInferFusionKernels.Values)
	}
}

// checkFusionAutoEnable: the fact names exactly the architectures of SGLang's server_args.py.
func checkFusionAutoEnable(t *testing.T, file string) {
	if archs := lines(t, file); !slices.Equal(archs, enginefacts.SGLangFusionAutoEnable.Values) {
		t.Errorf("server_args.py lists %v, the fact %v", archs, enginefacts.SGLangFusionAutoEnable.Values)
	}
}

// checkFrontendTraceName: the front end's trace file, named as torch's trace handler names it
// from that worker name ({worker}.{ms}.pt.trace.json.gz), is not collected as a rank; a
// worker's is.
func checkFrontendTraceName(t *testing.T, file string) {
	l := lines(t, file)
	if len(l) != 1 || !strings.HasPrefix(l[0], "{host}_{pid}") {
		t.Fatalf("worker name %v", l)
	}
	dir := t.TempDir()
	front := filepath.Join(dir, strings.NewReplacer("{host}", "gpu-node", "{pid}", "4242").Replace(l[0])+".1733400000000.pt.trace.json.gz")
	worker := filepath.Join(dir, "gpu-node_4243-rank-0.1733400000001.pt.trace.json.gz")
	for _, p := range []string{front, worker} {
		if err := os.WriteFile(p, []byte(`{"traceEvents": []}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !profile.IsFrontendTrace(front) || profile.IsFrontendTrace(worker) {
		t.Errorf("IsFrontendTrace: front %v worker %v", profile.IsFrontendTrace(front), profile.IsFrontendTrace(worker))
	}
	files, err := profile.CollectTraces(dir, time.Time{})
	if err != nil || len(files) != 1 || files[0] != worker {
		t.Errorf("CollectTraces = %v, %v; want only the worker's trace", files, err)
	}
}

// checkProfilerConfig: reckon's --profiler-config JSON uses exactly ProfilerConfig's field names
// and asks for the torch profiler with a directory.
func checkProfilerConfig(t *testing.T, file string) {
	fields := lines(t, file)
	var got map[string]string
	if err := json.Unmarshal([]byte(vllm.ProfilerConfigArg("/traces")), &got); err != nil {
		t.Fatal(err)
	}
	if keys := sortedKeys(got); !slices.Equal(keys, fields) || got["profiler"] != "torch" || got["torch_profiler_dir"] != "/traces" {
		t.Errorf("reckon sends %v, ProfilerConfig's fields are %v", got, fields)
	}
	if !slices.Equal(enginefacts.VLLMProfilerConfig.Values[1:], fields) {
		t.Errorf("fact values %v", enginefacts.VLLMProfilerConfig.Values)
	}
}

// TestTruncatedRealTrace: the corpus's real trace cut short (a rank still flushing) beside a
// complete copy is skipped and named; the complete one still counts.
func TestTruncatedRealTrace(t *testing.T) {
	b := readFile(t, filepath.Join("..", "..", "fixtures", "conformance", "traces", "torch-2.11-nccl-world1-h200.trace.json.gz"))
	dir := t.TempDir()
	whole := filepath.Join(dir, "1-TP-0.trace.json.gz")
	cut := filepath.Join(dir, "1-TP-1.trace.json.gz")
	if err := os.WriteFile(whole, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cut, b[:len(b)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := profile.ParseTraces(context.Background(), []string{whole, cut})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Files) != 1 || len(s.Skipped) != 1 || s.Skipped[0].Path != cut || !bytes.Contains([]byte(s.Skipped[0].Reason), []byte("truncated")) {
		t.Errorf("files %d skipped %+v", len(s.Files), s.Skipped)
	}
}
