package core

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

func TestParseNum(t *testing.T) {
	for in, want := range map[string]float64{"1,234,567": 1234567, "106,640": 106640, "12.5": 12.5, "-1.86": -1.86, " 7 ": 7} {
		got, err := ParseNum(in)
		if err != nil || got != want {
			t.Errorf("ParseNum(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "abc", "1.2.3", "NaN", "Inf"} {
		if _, err := ParseNum(bad); err == nil {
			t.Errorf("ParseNum(%q) succeeded, want an error", bad)
		}
	}
}

func TestToGiB(t *testing.T) {
	cases := []struct {
		v    float64
		unit string
		want float64
	}{{2, "GB", 2}, {2, "GiB", 2}, {512, "MiB", 0.5}, {512, "MB", 0.5}, {1, "TB", 1024}, {3, "", 3}}
	for _, c := range cases {
		if got := ToGiB(c.v, c.unit); got != c.want {
			t.Errorf("ToGiB(%v, %q) = %v, want %v", c.v, c.unit, got, c.want)
		}
	}
}

func TestStripANSI(t *testing.T) {
	for in, want := range map[string]string{
		"\x1b[1;36m(VllmWorker rank=0 pid=1)\x1b[0;0m INFO":    "(VllmWorker rank=0 pid=1) INFO",
		"[1;36m(EngineCore_DP0 pid=9)[0;0m INFO":               "(EngineCore_DP0 pid=9) INFO",
		"[2025-06-12 22:41:35 TP0] plain":                      "[2025-06-12 22:41:35 TP0] plain",
		"bs [1, 2, 4, 8]":                                      "bs [1, 2, 4, 8]",
		"[model] x":                                            "[model] x",
		"ESC[36m(RayWorkerWrapper pid=1, ip=10.0.0.1)ESC[0m x": "(RayWorkerWrapper pid=1, ip=10.0.0.1) x",
		"^[[36m(RayWorkerWrapper pid=1)^[[0m x":                "(RayWorkerWrapper pid=1) x",
		"ESCAPE[x] stays":                                      "ESCAPE[x] stays",
	} {
		if got := StripANSI(in); got != want {
			t.Errorf("StripANSI(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScanLinesLongLinesAndCR(t *testing.T) {
	long := strings.Repeat("x", MaxLineBytes+100)
	in := "a\r\n" + long + "\nlast"
	var got []string
	var nums []int
	err := ScanLines(strings.NewReader(in), func(n int, line string) error {
		nums = append(nums, n)
		got = append(got, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != "a" || len(got[1]) != MaxLineBytes || got[2] != "last" || nums[2] != 3 {
		t.Fatalf("lines = %d, first %q, second len %d, third %q (n=%v)", len(got), got[0], len(got[1]), got[len(got)-1], nums)
	}
}

func TestPerRankAggregation(t *testing.T) {
	var p PerRank
	if p.Min() != nil || p.Max() != nil || p.MinInt() != nil {
		t.Fatal("empty PerRank must give nil")
	}
	p.First("TP0", 10)
	p.First("TP0", 99) // ignored: First keeps the first value of a rank
	p.First("TP1", 8.5)
	if *p.Min() != 8.5 || *p.Max() != 10 {
		t.Errorf("min/max = %v/%v, want 8.5/10", *p.Min(), *p.Max())
	}
	var q PerRank
	q.Add("TP0", 1.25)
	q.Add("TP0", 0.5)
	if *q.Min() != 1.75 {
		t.Errorf("sum = %v, want 1.75", *q.Min())
	}
}

func TestClassify(t *testing.T) {
	cases := map[string]string{
		"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB":                                                                                                   KindOOM,
		"RuntimeError: CUDA error: out of memory":                                                                                                                                  KindOOM,
		"[2025-03-29 18:18:34 TP0] RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.":                                                                 KindKVTooSmall,
		"ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`":                                                                            KindKVTooSmall,
		"ValueError: To serve at least one request with the model's max seq len (8192), 1.0 GiB KV cache is needed, which is larger than the available KV cache memory (0.5 GiB).": KindKVTooSmall,
		"Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:368 'invalid argument'":                                                                                          KindCustomAllReduce,
		"RuntimeError: CUDART error: peer access is not supported between these two devices (custom_all_reduce)":                                                                   KindCustomAllReduce,
		"Exception: Capture cuda graph failed: CUDA error: an illegal memory access was encountered":                                                                               KindGraphCapture,
		"torch.distributed.DistBackendError: NCCL error in: NCCLUtils.cpp:133, unhandled cuda error":                                                                               KindNCCL,
		"[rank0]:[E] ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)":                                                                   KindNCCL,
		"RuntimeError: CUDA error: an illegal memory access was encountered":                                                                                                       KindCUDA,
		"RuntimeError: CUDA error: device-side assert triggered":                                                                                                                   KindCUDA,
		"ERROR 07-07 15:19:51 [core.py:515] EngineCore failed to start.":                                                                                                           KindOther,
		"ValueError: unsupported model": KindOther,
		"[2026-11-29 10:08:27 TP0] token_to_kv_pool_allocator memory leak detected! available_size=133280, protected_size=0, self.max_total_num_tokens=134304": KindOther,
		"Feb 04 08:47:05 host python3[1]: ERROR 02-04 08:47:05 core.py:45] EngineCore failed to start.":                                                        KindOther,
		"vllm-1  | ERROR 11-18 18:07:28 engine.py:366] RuntimeError: CUDA error: an illegal memory access was encountered":                                     KindCUDA,
		"ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88.":                                                    KindKVTooSmall,
		"RuntimeError: alloc_token_slots runs out of memory. Please set a smaller number for `--max-running-requests`.":                                        KindKVTooSmall,
		"torch._dynamo.exc.InternalTorchDynamoError: RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture.":                     KindGraphCapture,
		"ray.exceptions.RayTaskError(ValueError): ray::RayWorkerWrapper.execute_method() (pid=7106, ip=192.168.10.10)":                                         KindOther,
		"[pod/vllm-0/vllm] ValueError: unsupported model":                                                                                                      KindOther,
		"RuntimeError: Decode out of memory. Try to lower your batch size.":                                                                                    KindKVTooSmall,
		// Not errors:
		"[2025-03-07 21:49:33 TP13] Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.1474 -> 0.1845":                                                                                                                                                                   "",
		"(VllmWorkerProcess pid=2421) ERROR 10-14 12:32:47 multiproc_worker_utils.py:233] The above exception was the direct cause of the following exception:":                                                                                                                              "",
		"During handling of the above exception, another exception occurred:":                                                                                                                                                                                                                "",
		"INFO 03-08 16:44:29 [gpu_worker.py:456] Available KV cache memory: 17.36 GiB":                                                                                                                                                                                                       "",
		"[pod/vllm-0/vllm] INFO 03-08 16:44:29 [kv_cache_utils.py:1314] GPU KV cache size: 188,640 tokens":                                                                                                                                                                                   "",
		"frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long> >) + 0x1d2":                                                                                                                                                                      "",
		"INFO 08-19 07:51:12 model_runner.py:1028] CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of memory, consider decreasing `gpu_memory_utilization` or enforcing eager mode.":                                                                          "",
		"INFO 12-19 22:58:27 model_runner.py:1415] Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is not static. If out-of-memory error occurs during cudagraph capture, consider decreasing `gpu_memory_utilization` or switching to eager mode.": "",
		"WARNING 07-02 17:41:37 custom_all_reduce.py:118] Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test failed. To silence this warning, specify disable_custom_all_reduce=True explicitly.":                                                       "",
		"CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.":                                                                                                                                                            "",
		"Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.":                                                                                                                                                                                                                "",
		`  File "/x/custom_all_reduce.py", line 307, in register_graph_buffers`:                                                                                                                                                                                                              "",
		"ERROR 07-07 15:19:51 [core.py:515]     engine_core = EngineCoreProc(*args, **kwargs)":                                                                                                                                                                                               "",
		"INFO 02-22 22:08:58 cuda.py:229] Using Flash Attention backend.":                                                                                                                                                                                                                    "",
		"/usr/lib/python3/torch/utils/cpp_extension.py:2356: UserWarning: TORCH_CUDA_ARCH_LIST is not set":                                                                                                                                                                                   "",
		"[2025-11-10 19:59:08 TP0] Registering 3492 cuda graph addresses":                                                                                                                                                                                                                    "",
	}
	for line, want := range cases {
		if got := Classify(line); got != want {
			t.Errorf("Classify(%q) = %q, want %q", line, got, want)
		}
	}
}

// A generic CUDA error raised from custom-allreduce code is a custom-allreduce failure; the same
// error raised elsewhere stays a CUDA error.
func TestErrorCollectorCustomAllReduceFrames(t *testing.T) {
	log := strings.Join([]string{
		"Traceback (most recent call last):", // 1
		`  File "/sglang/srt/distributed/device_communicators/custom_all_reduce.py", line 307, in register_graph_buffers`,
		"    self.register_buffer(handles, offsets)",
		"RuntimeError: CUDA error: invalid argument", // 4
		"Traceback (most recent call last):",         // 5
		`  File "/sglang/srt/layers/sampler.py", line 10, in forward`,
		"RuntimeError: CUDA error: device-side assert triggered", // 7
	}, "\n")
	var c ErrorCollector
	_ = ScanLines(strings.NewReader(log), func(n int, line string) error { c.Line(n, line); return nil })
	got := c.Errors()
	if len(got) != 2 || got[0].Kind != KindCustomAllReduce || got[0].Line != 4 || got[1].Kind != KindCUDA || got[1].Line != 7 {
		t.Errorf("errors = %+v, want custom_allreduce at 4 and cuda at 7", got)
	}
}

func TestErrorCollectorTracebacks(t *testing.T) {
	log := strings.Join([]string{
		"[2025-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):", // 1
		`  File "/sglang/srt/managers/scheduler.py", line 10, in run`,                              // 2
		"    except RuntimeError:",                                                                 // 3
		"    raise RuntimeError(\"x\")",                                                            // 4
		"RuntimeError: CUDA error: an illegal memory access was encountered",                       // 5
		"[2025-01-01 00:00:01 TP1] Scheduler hit an exception: Traceback (most recent call last):", // 6
		`  File "/sglang/srt/managers/scheduler.py", line 10, in run`,                              // 7
		"KeyError: 'foo'",                                                    // 8
		"Traceback (most recent call last):",                                 // 9
		`  File "/x.py", line 1, in <module>`,                                // 10
		"RuntimeError: CUDA error: an illegal memory access was encountered", // 11 (dup of 5)
		"Traceback (most recent call last):",                                 // 12 (never finished)
		`  File "/x.py", line 1, in <module>`,                                // 13
	}, "\n")
	var c ErrorCollector
	_ = ScanLines(strings.NewReader(log), func(n int, line string) error { c.Line(n, line); return nil })
	got := c.Errors()
	want := []LogError{{KindCUDA, 5, ""}, {KindTraceback, 8, ""}, {KindTraceback, 12, ""}}
	if len(got) != len(want) {
		t.Fatalf("errors = %+v, want kinds/lines %+v", got, want)
	}
	for k := range want {
		if got[k].Kind != want[k].Kind || got[k].Line != want[k].Line {
			t.Errorf("error %d = %+v, want %s at line %d", k, got[k], want[k].Kind, want[k].Line)
		}
	}
}

func TestSplitSegmentsGluedRecords(t *testing.T) {
	line := "Loading: 100%|##| 4/4 [00:01<00:00][2025-01-01 10:00:00 TP0] A=1[2025-01-01 10:00:00 TP1] A=2"
	re := mustPrefix()
	segs := SplitSegments(line, re, func(m []string) (string, bool) { return m[1], true }, "")
	if len(segs) != 3 || segs[0].Rank != "" || segs[1].Rank != "TP0" || segs[2].Rank != "TP1" ||
		!strings.HasSuffix(segs[1].Text, "A=1") || !strings.HasSuffix(segs[2].Text, "A=2") {
		t.Fatalf("segments = %+v", segs)
	}
}

func TestAllReduceTracker(t *testing.T) {
	cases := []struct {
		lines      []string
		want       string
		wantReason string
	}{
		{[]string{"Custom allreduce is disabled due to an unsupported world size: 3. Supported world sizes: [2, 4, 6, 8]. To silence this warning, specify disable_custom_all_reduce=True explicitly."},
			AllReduceNCCL, "due to an unsupported world size: 3. Supported world sizes: [2, 4, 6, 8]"},
		{[]string{"CustomAllReduceV2 is disabled because it requires full NVLink"}, AllReduceNCCL, "it requires full NVLink"},
		{[]string{"server_args=ServerArgs(model_path='m', tp_size=8, disable_custom_all_reduce=True, enable_mscclpp=False)"}, AllReduceNCCL, "disabled by flag (disable_custom_all_reduce=True)"},
		{[]string{"non-default args: {'model': 'm', 'disable_custom_all_reduce': True}"}, AllReduceNCCL, "disabled by flag (disable_custom_all_reduce=True)"},
		{[]string{"Using ['CUSTOM', 'SYMM_MEM', 'PYNCCL'] all-reduce backends (in dispatch order) for group 'tp:0' out of potential backends"}, AllReduceCustom, ""},
		{[]string{"Using ['PYNCCL'] all-reduce backends (in dispatch order) for group 'tp:0' out of potential backends: ['CUSTOM', 'PYNCCL']"}, AllReduceNCCL, "all-reduce backends ['PYNCCL'] do not include CUSTOM"},
		{[]string{"Registering 3492 cuda graph addresses"}, AllReduceCustom, ""},
		// No release prints "Allreduce backend: X" (only the old reference engine did): not evidence.
		{[]string{"Allreduce backend: custom (one-shot), topology=pcie, tp_size=8"}, AllReduceUnknown, ""},
		{[]string{"Allreduce backend: nccl (ring), topology=pcie, tp_size=8"}, AllReduceUnknown, ""},
		{[]string{"CustomAllReduceV2 is disabled because it's not supported on more than two PCIe-only GPUs. To silence this warning, specify disable_custom_all_reduce=True explicitly."},
			AllReduceNCCL, "it's not supported on more than two PCIe-only GPUs"},
		// Off-evidence wins over on-evidence (another group or rank fell back).
		{[]string{"Registering 12 cuda graph addresses", "Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs."}, AllReduceNCCL, "it's not supported on more than two PCIe-only GPUs"},
		{[]string{"server_args=ServerArgs(disable_custom_all_reduce=False)", "Using Flash Attention backend."}, AllReduceUnknown, ""},
	}
	for _, c := range cases {
		var tr AllReduceTracker
		for _, l := range c.lines {
			tr.Record(l)
		}
		got, reason := tr.Result()
		r := ""
		if reason != nil {
			r = *reason
		}
		if got != c.want || r != c.wantReason {
			t.Errorf("%q: got %s (%q), want %s (%q)", c.lines, got, r, c.want, c.wantReason)
		}
	}
}

func TestErrorCollectorInterleavedRanks(t *testing.T) {
	log := strings.Join([]string{
		"(VllmWorker rank=0 pid=10) ERROR 05-21 09:27:46 [multiproc_executor.py:470] Traceback (most recent call last):",                                     // 1
		"(VllmWorker rank=1 pid=11) ERROR 05-21 09:27:46 [multiproc_executor.py:470] Traceback (most recent call last):",                                     // 2
		`(VllmWorker rank=0 pid=10) ERROR 05-21 09:27:46 [multiproc_executor.py:470]   File "/v/worker.py", line 3, in f`,                                    // 3
		`(VllmWorker rank=1 pid=11) ERROR 05-21 09:27:46 [multiproc_executor.py:470]   File "/v/worker.py", line 3, in f`,                                    // 4
		"(VllmWorker rank=1 pid=11) ERROR 05-21 09:27:46 [multiproc_executor.py:470] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB", // 5
		"(VllmWorker rank=0 pid=10) ERROR 05-21 09:27:46 [multiproc_executor.py:470] RuntimeError: NCCL error: unhandled cuda error",                         // 6
	}, "\n")
	var c ErrorCollector
	_ = ScanLines(strings.NewReader(log), func(n int, line string) error { c.Line(n, line); return nil })
	got := c.Errors()
	if len(got) != 2 || got[0].Kind != KindOOM || got[0].Line != 5 || got[1].Kind != KindNCCL || got[1].Line != 6 {
		t.Fatalf("errors = %+v, want oom at 5 and nccl at 6 (one per rank's traceback)", got)
	}
}

// A log saved as UTF-16 (PowerShell ">") or with a UTF-8 BOM reads as the same lines; without a
// BOM the bytes are taken as they are.
func TestScanLinesByteOrderMarks(t *testing.T) {
	text := "INFO 01-01 00:00:00 [x.py:1] Model loading took 1.5 GiB\r\nÄ 😀 end"
	want := []string{"INFO 01-01 00:00:00 [x.py:1] Model loading took 1.5 GiB", "Ä 😀 end"}
	le := []byte{0xFF, 0xFE}
	be := []byte{0xFE, 0xFF}
	for _, u := range utf16.Encode([]rune(text)) {
		le = append(le, byte(u), byte(u>>8))
		be = append(be, byte(u>>8), byte(u))
	}
	for name, in := range map[string][]byte{
		"utf16le": le, "utf16be": be, "utf8bom": append([]byte{0xEF, 0xBB, 0xBF}, text...), "plain": []byte(text),
	} {
		var got []string
		_ = ScanLines(bytes.NewReader(in), func(_ int, line string) error { got = append(got, line); return nil })
		if !slices.Equal(got, want) {
			t.Errorf("%s: lines = %q, want %q", name, got, want)
		}
		if s := string(ToUTF8(in)); strings.Contains(s, "\x00") || !strings.HasSuffix(s, "😀 end") {
			t.Errorf("%s: ToUTF8 = %q", name, s)
		}
	}
	// An odd trailing byte of a cut UTF-16 file becomes U+FFFD instead of being lost silently.
	var got []string
	cut := le[:len(le)-1]
	_ = ScanLines(bytes.NewReader(cut), func(_ int, line string) error { got = append(got, line); return nil })
	if len(got) != 2 || !strings.HasSuffix(got[1], "\uFFFD") {
		t.Errorf("cut UTF-16: %q", got)
	}
}
