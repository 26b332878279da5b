package profile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Real demangled names as torch's profiler writes them (return type, namespaces, templates,
// parameters), from the kernels' declarations in FlashInfer, NCCL and vLLM.
const (
	fusedOneShot = "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<(flashinfer::trtllm_allreduce_fusion::AllReduceFusionPattern)1, __nv_bfloat16, 8, true, true>(flashinfer::trtllm_allreduce_fusion::AllReduceFusionParams<__nv_bfloat16>)"
	fusedMoE     = "void flashinfer::trtllm_moe_allreduce_fusion::moereduce_allreduce_fusion_kernel_oneshot_lamport<__nv_bfloat16, 8, true, true, true, false>(flashinfer::trtllm_moe_allreduce_fusion::MoeReductionAllReduceFusionParams<__nv_bfloat16>)"
	voidNCCL     = "void ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
)

func TestBaseName(t *testing.T) {
	for in, want := range map[string]string{
		voidNCCL:     "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
		fusedOneShot: "allreduce_fusion_kernel_oneshot_lamport",
		fusedMoE:     "moereduce_allreduce_fusion_kernel_oneshot_lamport",
		"void vllm::cross_device_reduce_1stage<float, 2>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, float*, int, int)": "cross_device_reduce_1stage",
		"void (anonymous namespace)::foo_kernel<int>(int*)":                                                                    "foo_kernel",
		"nvjet_tst_192x192": "nvjet_tst_192x192",
	} {
		if got := BaseName(in); got != want {
			t.Errorf("BaseName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestClassifyDemangled: a "void "-prefixed NCCL kernel is NCCL (the old rule called it custom:
// the name did not start with "nccl"), and fusion kernels are fused, never custom.
func TestClassifyDemangled(t *testing.T) {
	for name, want := range map[string]Kind{voidNCCL: NCCLAllReduce, fusedOneShot: FusedAllReduce, fusedMoE: FusedAllReduce,
		"void ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)": OtherCollective} {
		if got := Classify(name); got != want {
			t.Errorf("Classify(%q) = %v, want %v", name, got, want)
		}
	}
}

func sum(nccl, custom, fused int, names ...string) *Summary {
	s := &Summary{}
	s.Add(FileCounts{Rank: 0, NCCLAllReduce: nccl, CustomAllReduce: custom, FusedAllReduce: fused, Kernels: names})
	return s
}

// TestVerdictMajority: one custom-looking kernel does not outweigh 256 NCCL kernels; fusion beside
// NCCL is "fused" (the reproduced 960 fusion / 512 NCCL window); real custom allreduce with an
// NCCL fallback for large tensors stays custom.
func TestVerdictMajority(t *testing.T) {
	cases := []struct {
		s    *Summary
		want string
		in   string
	}{
		{sum(256, 1, 0, voidNCCL, "void my::odd_allreduce_helper(float*)"), VerdictNCCL, "1 custom-looking kernel(s) of 257"},
		{sum(512, 0, 960, voidNCCL, fusedOneShot), VerdictFused, "960 FlashInfer allreduce fusion / 0 custom / 512 NCCL"},
		{sum(4, 96, 0), VerdictCustom, "96 custom / 4 NCCL"},
		{sum(0, 0, 0), VerdictUnknown, "0 custom / 0 NCCL"},
		{sum(300, 0, 1, voidNCCL, fusedOneShot), VerdictNCCL, "1 fusion kernel(s) of 301"},
	}
	for _, c := range cases {
		if got := c.s.Verdict(); got != c.want {
			t.Errorf("%s: Verdict = %q, want %q", c.s, got, c.want)
		}
		if !strings.Contains(c.s.String(), c.in) {
			t.Errorf("String = %q, want it to contain %q", c.s, c.in)
		}
	}
}

// TestParseTracesSkipsTruncated: a rank still flushing (its gzip cut short) is skipped and named;
// the complete ranks are counted. ParseFiles, the strict reader, still refuses it.
func TestParseTracesSkipsTruncated(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for r := 0; r < 3; r++ {
		files = append(files, writeFile(t, dir, fmt.Sprintf("p-TP-%d.trace.json.gz", r), kinetoTrace(r, kernel(voidNCCL, 1), kernel(voidNCCL, 2)), true))
	}
	full, err := os.ReadFile(files[2])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files[2], full[:len(full)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ParseTraces(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	if s.NCCLAllReduce != 4 || s.Ranks() != 2 || len(s.Skipped) != 1 || s.Skipped[0].Path != files[2] || !strings.Contains(s.Skipped[0].Reason, "truncated") {
		t.Errorf("summary %s, skipped %+v: want 4 NCCL kernels on 2 ranks and rank 2 skipped as truncated", s, s.Skipped)
	}
	if s.Verdict() != VerdictNCCL || !strings.Contains(s.String(), "1 unreadable trace file(s) skipped") {
		t.Errorf("verdict %q, %s", s.Verdict(), s)
	}
	if _, err := ParseFiles(context.Background(), files); err == nil {
		t.Error("ParseFiles accepted a truncated trace")
	}
	// Every file truncated: an error, not an empty verdict.
	if _, err := ParseTraces(context.Background(), files[2:]); err == nil || !strings.Contains(err.Error(), "no trace file could be read") {
		t.Errorf("all truncated: err = %v", err)
	}
}

// TestCollectSkipsFrontend: vLLM's AsyncLLM CPU trace in the same folder is not a rank.
func TestCollectSkipsFrontend(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "host_123.async_llm.1733400000000.pt.trace.json.gz", kinetoTrace(0), true)
	w := writeFile(t, dir, "host_124-rank-0.1733400000001.pt.trace.json.gz", kinetoTrace(0, kernel(voidNCCL, 1)), true)
	got, err := CollectTraces(dir, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != w {
		t.Errorf("CollectTraces = %v, want only the worker's trace", got)
	}
}

// TestWaitTracesSettles: with one of two ranks written, WaitTraces keeps looking; once the second
// appears and nothing changes between two looks it returns both, settled.
func TestWaitTracesSettles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "p-TP-0.trace.json.gz", kinetoTrace(0, kernel(voidNCCL, 1)), true)
	polls := 0
	onPoll = func(n int) {
		polls = n + 1
		if n == 3 {
			writeFile(t, dir, "p-TP-1.trace.json.gz", kinetoTrace(1, kernel(voidNCCL, 1)), true)
		}
	}
	t.Cleanup(func() { onPoll = nil })
	files, settled, err := WaitTraces(context.Background(), dir, time.Time{}, SettleOptions{Ranks: 2, Poll: time.Millisecond})
	if err != nil || !settled || len(files) != 2 {
		t.Fatalf("WaitTraces = %v, %v, %v; want both ranks, settled", files, settled, err)
	}
	if polls < 5 {
		t.Errorf("returned after %d looks; the second rank appeared at look 4 and needs one more unchanged look", polls)
	}
	// Never settling (a rank missing): ctx bounds the wait, the files seen are returned.
	ctx, cancel := context.WithCancel(context.Background())
	onPoll = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	files, settled, err = WaitTraces(ctx, dir, time.Time{}, SettleOptions{Ranks: 3, Poll: time.Millisecond})
	if err != nil || settled || len(files) != 2 {
		t.Errorf("unsettled: %v, %v, %v; want the two files, not settled", files, settled, err)
	}
	if _, _, err := WaitTraces(context.Background(), filepath.Join(dir, "missing"), time.Time{}, SettleOptions{}); err == nil {
		t.Error("a missing directory is not an error")
	}
}

// TestWaitTracesSharedDir: a directory shared by two windows (a user's own trace directory):
// the first window's traces, written a moment before and so within the coarse "since", are not
// the second window's.
func TestWaitTracesSharedDir(t *testing.T) {
	dir := t.TempDir()
	old := writeFile(t, dir, "w_1-rank-0.1.pt.trace.json.gz", kinetoTrace(0, kernel(voidNCCL, 1)), true)
	before := Snapshot(dir)
	if len(before) != 1 {
		t.Fatalf("Snapshot = %v", before)
	}
	fresh := writeFile(t, dir, "w_2-rank-0.2.pt.trace.json.gz", kinetoTrace(0, kernel(fusedOneShot, 1)), true)
	files, settled, err := WaitTraces(context.Background(), dir, time.Now().Add(-time.Hour), SettleOptions{Ranks: 1, Poll: time.Millisecond, Existing: before})
	if err != nil || !settled || len(files) != 1 || files[0] != fresh {
		t.Errorf("WaitTraces = %v, %v, %v; want only %s (not %s)", files, settled, err, fresh, old)
	}
	if len(Snapshot(filepath.Join(dir, "missing"))) != 0 {
		t.Error("a missing directory's snapshot is not empty")
	}
}
