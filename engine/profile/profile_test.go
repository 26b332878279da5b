package profile

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	ncclRing  = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
	ncclOld   = "ncclKernel_AllReduce_RING_LL_Sum_half(ncclWorkElem)"
	ncclGath  = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
	sglCustom = "void sglang::cross_device_reduce_1stage<__nv_bfloat16, 4>(sglang::RankData*, sglang::RankSignals, sglang::Signal*, __nv_bfloat16*, int, int)"
	vllmTwo   = "void vllm::cross_device_reduce_2stage<float, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, float*, int, int)"
)

// kinetoTrace is laid out the way torch's Kineto writes a trace (one key per line group).
func kinetoTrace(rank int, events ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {\"id\": %d, \"name\": \"NVIDIA H200\", \"totalGlobalMem\": 150109880320}\n  ],\n", rank)
	fmt.Fprintf(&b, "  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": %d, \"world_size\": 4},\n  \"traceEvents\": [\n", rank)
	b.WriteString(strings.Join(events, ",\n"))
	b.WriteString("\n  ],\n  \"traceName\": \"x.pt.trace.json\"\n}\n")
	return b.String()
}

func kernel(name string, ts float64) string {
	return fmt.Sprintf("  {\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": %q, \"pid\": 0, \"tid\": 7,\n    \"ts\": %.3f, \"dur\": 3.2,\n    \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 12}\n  }", name, ts)
}

func writeFile(t *testing.T, dir, name, content string, gz bool) string {
	t.Helper()
	p := filepath.Join(dir, name)
	data := []byte(content)
	if gz {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(data)
		_ = zw.Close()
		data = buf.Bytes()
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClassify(t *testing.T) {
	for name, want := range map[string]Kind{
		ncclRing: NCCLAllReduce, ncclOld: NCCLAllReduce, ncclGath: OtherCollective,
		"ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)": OtherCollective,
		sglCustom: CustomAllReduce, vllmTwo: CustomAllReduce,
		"void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<bf16>": FusedAllReduce,
		"two_shot_all_reduce_kernel": CustomAllReduce, "QuickAllReduce": CustomAllReduce,
		"void at::native::vectorized_elementwise_kernel<4>": Ignored, "nvjet_tst_192x192": Ignored,
	} {
		if got := Classify(name); got != want {
			t.Errorf("Classify(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestParseObjectForm(t *testing.T) {
	dir := t.TempDir()
	trace := kinetoTrace(2,
		`  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}`,
		kernel(ncclRing, 10), kernel(ncclRing, 20), kernel(ncclOld, 30), kernel(ncclGath, 40),
		kernel(sglCustom, 50), kernel(vllmTwo, 60), kernel("void gemm_kernel<128>", 70),
		`  {"ph": "B", "cat": "kernel", "name": "`+sglCustom+`", "ts": 80}`,
		`  {"ph": "X", "cat": "Kernel", "name": "`+sglCustom+`", "ts": "1699999999.125", "dur": "2.5"}`,
		`  {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "python"}}`,
	)
	p := writeFile(t, dir, "trace.json", trace, false)
	fc, err := ParseFile(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	want := &FileCounts{Path: p, Rank: 2, NCCLAllReduce: 3, CustomAllReduce: 3, OtherCollectives: 1,
		Kernels: []string{ncclRing, ncclOld, ncclGath, sglCustom, vllmTwo}, Events: 11}
	if d := cmp.Diff(want, fc); d != "" {
		t.Errorf("counts (-want +got):\n%s", d)
	}
}

func TestParseArrayFormGzipAndRankFromName(t *testing.T) {
	dir := t.TempDir()
	arr := "[" + kernel(ncclRing, 1) + "," + kernel(ncclRing, 2) + "]"
	// gzip detected by its bytes, whatever the name says.
	for _, name := range []string{"1718000000-TP-3.trace.json.gz", "plain-TP-3.trace.json"} {
		p := writeFile(t, dir, name, arr, true)
		fc, err := ParseFile(context.Background(), p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if fc.Rank != 3 || fc.NCCLAllReduce != 2 || fc.CustomAllReduce != 0 || fc.Events != 2 {
			t.Errorf("%s: %+v", name, fc)
		}
	}
	p := writeFile(t, dir, "worker_0.1718000000123.pt.trace.json", arr, false)
	fc, err := ParseFile(context.Background(), p)
	if err != nil || fc.Rank != -1 {
		t.Errorf("no rank anywhere: %+v, %v", fc, err)
	}
}

func TestParseErrors(t *testing.T) {
	dir := t.TempDir()
	cases := map[string][]string{
		`{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "a"},, ]}`: {"bad.json", "at byte 59"},
		`{"traceEvents": [{"ph": "X", "cat": "kernel", "name": 12}]}`:     {"bad.json", "trace event 0"},
		`{"schemaVersion": 1}`: {"bad.json", `no "traceEvents" array`},
		`"hello"`:              {"bad.json", "expected a Chrome trace"},
		`{"traceEvents": [`:    {"bad.json", "unexpected EOF"},
		`{"traceEvents": []} {"traceEvents": []}`:                  {"bad.json", "expected the end of the file"},
		`{"distributedInfo": {"rank": "zero"}, "traceEvents": []}`: {"bad.json", `"distributedInfo"`},
	}
	for content, want := range cases {
		p := writeFile(t, dir, "bad.json", content, false)
		_, err := ParseFile(context.Background(), p)
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: err = %v, want it to name %q", content, err, w)
			}
		}
	}
	if _, err := ParseFile(context.Background(), filepath.Join(dir, "missing.json.gz")); err == nil || !strings.Contains(err.Error(), "missing.json.gz") {
		t.Errorf("missing file: err = %v", err)
	}
	p := writeFile(t, dir, "corrupt.json.gz", "\x1f\x8bnot gzip at all", false)
	if _, err := ParseFile(context.Background(), p); err == nil || !strings.Contains(err.Error(), "corrupt.json.gz") {
		t.Errorf("corrupt gzip: err = %v", err)
	}
}

func TestParseRefusesLargeTrace(t *testing.T) {
	old := maxTraceBytes
	maxTraceBytes = 4096
	defer func() { maxTraceBytes = old }()
	var evs []string
	for k := range 200 {
		evs = append(evs, kernel(ncclRing, float64(k)))
	}
	p := writeFile(t, t.TempDir(), "big.trace.json.gz", kinetoTrace(0, evs...), true)
	_, err := ParseFile(context.Background(), p)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "big.trace.json.gz") || !strings.Contains(err.Error(), "uncompressed") {
		t.Fatalf("err = %v, want ErrTooLarge naming the file", err)
	}
}

func TestParseCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Parse(ctx, strings.NewReader("["+kernel(ncclRing, 1)+"]"), "x.json")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestKernelNamesBounded(t *testing.T) {
	var evs []string
	for k := range MaxKernelNames + 6 {
		evs = append(evs, kernel(fmt.Sprintf("custom_all_reduce_variant_%d", k), float64(k)))
	}
	fc, err := Parse(context.Background(), strings.NewReader(kinetoTrace(0, evs...)), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(fc.Kernels) != MaxKernelNames || !fc.KernelsTruncated || fc.CustomAllReduce != MaxKernelNames+6 {
		t.Errorf("%d names, truncated %v, %d custom", len(fc.Kernels), fc.KernelsTruncated, fc.CustomAllReduce)
	}
}

func TestSummaryVerdictAndString(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for r := range 4 {
		evs := []string{}
		for k := range 30 + (r % 2) {
			evs = append(evs, kernel(sglCustom, float64(k)))
		}
		paths = append(paths, writeFile(t, dir, fmt.Sprintf("p-TP-%d.trace.json.gz", r), kinetoTrace(r, evs...), true))
	}
	s, err := ParseFiles(context.Background(), paths)
	if err != nil {
		t.Fatal(err)
	}
	if s.Verdict() != VerdictCustom || s.String() != "122 custom / 0 NCCL allreduce kernels on 4 ranks" {
		t.Errorf("verdict %s, %q", s.Verdict(), s.String())
	}
	for _, c := range []struct {
		s       Summary
		verdict string
		line    string
	}{
		{Summary{Files: []FileCounts{{Rank: 0}, {Rank: 1}}, NCCLAllReduce: 40}, VerdictNCCL, "0 custom / 40 NCCL allreduce kernels on 2 ranks"},
		{Summary{Files: []FileCounts{{Rank: 0}}, NCCLAllReduce: 4, CustomAllReduce: 1}, VerdictCustom, "1 custom / 4 NCCL allreduce kernels on 1 rank"},
		{Summary{Files: []FileCounts{{Rank: -1}, {Rank: -1}}, OtherCollectives: 3}, VerdictUnknown, "0 custom / 0 NCCL allreduce kernels on 2 ranks (3 other NCCL collective kernels)"},
		{Summary{}, VerdictUnknown, "0 custom / 0 NCCL allreduce kernels on 0 ranks"},
	} {
		if c.s.Verdict() != c.verdict || c.s.String() != c.line {
			t.Errorf("%+v: verdict %s %q, want %s %q", c.s, c.s.Verdict(), c.s.String(), c.verdict, c.line)
		}
	}
	// A bad file fails the whole summary, naming the file.
	bad := writeFile(t, dir, "bad.trace.json", "{", false)
	if _, err := ParseFiles(context.Background(), append(paths, bad)); err == nil || !strings.Contains(err.Error(), "bad.trace.json") {
		t.Errorf("err = %v", err)
	}
}

func TestCollectTraces(t *testing.T) {
	dir := t.TempDir()
	old := writeFile(t, dir, "old-TP-0.trace.json.gz", "[]", true)
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Minute)
	a := writeFile(t, dir, "new-TP-0.trace.json.gz", "[]", true)
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := writeFile(t, dir, "sub/worker_1.1718.pt.trace.json", "[]", false)
	writeFile(t, dir, "notes.txt", "x", false)
	writeFile(t, dir, "engine.log", "x", false)
	_ = os.Symlink(a, filepath.Join(dir, "link.trace.json.gz"))
	got, err := CollectTraces(dir, since)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{a, b}, got); d != "" {
		t.Errorf("since: (-want +got):\n%s", d)
	}
	all, err := CollectTraces(dir, time.Time{})
	if err != nil || len(all) != 3 {
		t.Errorf("all: %v %v", all, err)
	}
	if _, err := CollectTraces(filepath.Join(dir, "nope"), since); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing dir: err = %v", err)
	}
}
