package gate

import (
	"github.com/reckon-ci/reckon/spec"
	"math"
	"time"
)

func fp(v float64) *float64 { return &v }

// trials makes n trials of a config with the given output throughput and latencies (spread a
// little so that medians and whiskers mean something).
func trials(n int, tput, ttft, tpot, itl float64) []Trial {
	out := make([]Trial, n)
	for i := range out {
		f := 1 + 0.02*float64(i-n/2)
		out[i] = Trial{Workload: "sharegpt-c16", Index: i, Metrics: map[string]float64{
			"output_throughput":  tput * f,
			"request_throughput": tput * f / 200,
			"completed":          200,
			"median_ttft_ms":     ttft / f, "p90_ttft_ms": ttft * 1.6 / f, "p99_ttft_ms": ttft * 2.4 / f,
			"median_tpot_ms": tpot / f, "p90_tpot_ms": tpot * 1.3 / f, "p99_tpot_ms": tpot * 1.7 / f,
			"median_itl_ms": itl / f, "p90_itl_ms": itl * 1.4 / f, "p99_itl_ms": itl * 2.1 / f,
		}}
	}
	return out
}

// sampleRun (a copy of the reporters' sample) is the story reckon exists for: custom allreduce forced onto PCIe shrinks the KV
// cache and halves throughput; an EAGLE-3 config fails to launch with a hostile log.
func sampleRun() *Run {
	start := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	return &Run{
		Schema:   ResultsSchema,
		SpecName: "pcie-custom-ar", SpecPath: "fixtures/specs/pcie-custom-ar.yaml", Engine: "refengine",
		Testbed: map[string]any{
			"gpu": "RTX-6000-Ada", "gpu_count": 8.0, "topology": "PCIe", "driver": "550.54.15",
			"nvlink": false, "gpus": []any{"GPU-0", "GPU-1"}, "cuda": map[string]any{"version": "12.4"},
		},
		TestbedKey:    "rtx6000ada-x8-pcie-550",
		ReckonVersion: "v0.1.0", GitCommit: "35e9fae",
		StartedAt: start, FinishedAt: start.Add(7*time.Minute + 13*time.Second),
		Configs: []Config{
			{
				Name: "nccl", Launches: 1, LogPath: "out/logs/nccl.log",
				Args: []string{"--tp", "8", "--disable-custom-all-reduce"},
				Engine: map[string]any{
					"kv_cache_tokens": 1212416.0, "kv_cache_gib": 10.42, "weights_gib": 16.1,
					"cuda_graph_gib": 1.18, "available_gpu_mem_gib": 2.05, "allreduce": "nccl",
					"max_running_requests": 256.0, "peak_gpu_mem_gib": 29.4, "errors": []any{},
				},
				Trials: trials(5, 89.5, 180, 41, 39), NumericsFile: "out/numerics/nccl.json",
				GPUPeakMiB: []float64{30120, 30116, 30118, 30121, 30119, 30117, 30120, 30118},
			},
			{
				Name: "custom-ar", Launches: 1, LogPath: "out/logs/custom-ar.log",
				Args: []string{"--tp", "8", "--enable-custom-all-reduce"},
				Engine: map[string]any{
					"kv_cache_tokens": 104857.0, "kv_cache_gib": 0.90, "weights_gib": 16.1,
					"cuda_graph_gib": 1.22, "available_gpu_mem_gib": 2.01, "allreduce": "custom",
					"custom_ar_buffer_gib": 3.85, "max_running_requests": 30.0, "peak_gpu_mem_gib": 29.4,
					"errors": []any{map[string]any{"kind": "other", "line": 12.0, "text": "warning: small KV cache"}},
				},
				Trials: trials(5, 38.3, 950, 96, 92), NumericsFile: "out/numerics/custom-ar.json",
				GPUPeakMiB: []float64{30150, 30148, 30151, 30149, 30150, 30152, 30148, 30150},
			},
			{
				Name: "eagle3", Launches: 1, LogPath: "out/logs/eagle3.log",
				Args:        []string{"--tp", "8", "--speculative-algorithm", "EAGLE3"},
				LaunchError: "engine exited with status 1 before it was ready (after 41s)",
				LogTail: "INFO loading draft model\n\x1b[31mERROR\x1b[0m <script>alert('x')</script> & \"quotes\"\x00\x07\n" +
					"RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\r\nprogress 10%\rprogress 100%\n",
			},
			{
				Name: "graph-bs-160", Launches: 1,
				Engine: map[string]any{"kv_cache_tokens": 1150000.0, "kv_cache_gib": 9.88, "weights_gib": 16.1,
					"cuda_graph_gib": 1.75, "available_gpu_mem_gib": 1.9, "allreduce": "nccl"},
				BaselineEngine: map[string]any{"kv_cache_tokens": 1151000.0, "kv_cache_gib": 9.89, "weights_gib": 16.1,
					"cuda_graph_gib": 1.74, "available_gpu_mem_gib": 1.9, "allreduce": "nccl"},
				Trials: []Trial{
					{Workload: "sharegpt-c16", Index: 0, Metrics: map[string]float64{"output_throughput": 91.2, "median_ttft_ms": math.NaN()}},
					{Workload: "sharegpt-c16", Index: 1, Metrics: map[string]float64{"output_throughput": 90.7, "median_ttft_ms": 175}},
				},
			},
		},
		Checks: []Check{
			{Verdict: Verdict{Name: "health", Kind: KindHealth, Config: "nccl", Outcome: "pass", Message: "nccl: started; allreduce nccl as asked"}, Labels: []string{"nccl", "memory"}, Status: StatusPassed, Duration: 41 * time.Second},
			{Verdict: Verdict{Name: "health", Kind: KindHealth, Config: "custom-ar", Outcome: "pass", Message: "custom-ar: started; allreduce custom as asked"}, Labels: []string{"custom-ar"}, Status: StatusPassed, Duration: 44 * time.Second},
			{Verdict: Verdict{Name: "kv_cache_gib >= 8", Kind: string(spec.KindFloor), Config: "custom-ar", Outcome: "fail", Category: CategoryBrokenInvariant, Message: "custom-ar: KV cache 0.90 GiB is under its floor 8 GiB", Details: "floor kv_cache_gib >= 8 (spec line 31)\nmeasured 0.90 GiB from the engine log", Metrics: map[string]float64{"kv_cache_gib": 0.9, "floor": 8}}, Labels: []string{"custom-ar", "memory"}, Status: StatusFailed},
			{Verdict: Verdict{Name: "output_throughput vs nccl", Kind: string(spec.KindRelative), Config: "custom-ar", Outcome: Fail, Category: CategoryRegression, Message: "custom-ar: output throughput -57% vs nccl", Details: "median 38.3 vs 89.5 tok/s over 5+5 trials\nMann-Whitney U p=0.0079; effect floor -5%", Stat: &StatResult{Metric: "output_throughput", BaseMedian: 89.5, HeadMedian: 38.3, Ratio: 38.3 / 89.5, CILow: 0.41, CIHigh: 0.45, PValue: 0.0079, Outcome: Regression}, Against: "nccl"}, Labels: []string{"custom-ar", "throughput"}, Status: StatusFailed, Duration: 3 * time.Minute},
			{Verdict: Verdict{Name: "output_throughput vs baseline", Kind: string(spec.KindThroughput), Config: "nccl", Outcome: Pass, Message: "nccl: output throughput +0.4% vs baseline (no change)", Stat: &StatResult{Metric: "output_throughput", BaseMedian: 89.1, HeadMedian: 89.5, Ratio: 89.5 / 89.1, CILow: 0.98, CIHigh: 1.03, PValue: 0.69, Outcome: NoChange}}, Labels: []string{"nccl", "throughput"}, Status: StatusPassed, Duration: 3 * time.Minute},
			{Verdict: Verdict{Name: "p99_ttft_ms vs baseline", Kind: string(spec.KindLatency), Config: "graph-bs-160", Outcome: "inconclusive", Message: "graph-bs-160: p99 TTFT inconclusive (2 trials; need 5)", Stat: &StatResult{Metric: "p99_ttft_ms", Outcome: Undecided, BaseMedian: math.NaN(), HeadMedian: math.NaN(), Ratio: math.NaN()}}, Status: StatusSkipped},
			{Verdict: Verdict{Name: "health", Kind: KindHealth, Config: "eagle3", Outcome: "error", Category: CategoryInfrastructure, Message: "eagle3: engine exited with status 1 before it was ready (after 41s)", Details: "command: refengine --tp 8 --speculative-algorithm EAGLE3"}, Status: StatusError},
			{Verdict: Verdict{Name: "allreduce probe tp8", Kind: string(spec.KindAllReduceProbe), Outcome: "pass", Message: "allreduce probe: custom one-shot within 2 ulp of nccl at every size", Metrics: map[string]float64{"max_rel_err": 3.1e-3}}, Labels: []string{"numerics"}, Status: StatusPassed},
			{Verdict: Verdict{Name: "greedy tokens custom-ar == nccl", Kind: string(spec.KindEquivalence), Config: "custom-ar", Outcome: "pass", Message: "custom-ar vs nccl: 64/64 prompts identical greedy output; max |Δlogprob| 0.0021", Metrics: map[string]float64{"max_abs_logprob_diff": 0.0021, "prompts": 64}, Against: "nccl"}, Labels: []string{"numerics"}, Status: StatusPassed},
		},
	}
}
