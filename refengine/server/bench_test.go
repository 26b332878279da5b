package server

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkThroughput measures output tokens/s of the default model over HTTP at concurrency 1,
// 8 and 32, tp 1 and 4 (prompts of 128 tokens, 128 output tokens, ignore_eos).
func BenchmarkThroughput(b *testing.B) {
	for _, tpn := range []int{1, 4} {
		for _, c := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("tp%d/c%d", tpn, c), func(b *testing.B) {
				ts := start(b, nil, true, "--tp-size", fmt.Sprint(tpn))
				b.ResetTimer()
				var tps float64
				for i := 0; i < b.N; i++ { // best of b.N trials (-benchtime Nx)
					tps = max(tps, ts.load(b, c, 2*c, 128, 128))
				}
				b.ReportMetric(tps, "out_tok/s")
			})
		}
	}
}

// BenchmarkTimeToReady measures the time from Build to a 200 from /health.
func BenchmarkTimeToReady(b *testing.B) {
	for _, tpn := range []int{1, 4} {
		b.Run(fmt.Sprintf("tp%d", tpn), func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				ts := start(b, nil, true, "--tp-size", fmt.Sprint(tpn))
				total += time.Since(t0)
				_ = ts.stop()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s_to_ready")
		})
	}
}

// BenchmarkAllReduceMatrix is the field's matrix: {nccl, custom} x {nvlink, pcie} x tp {2, 8}:
// KV tokens per rank and output tokens/s (concurrency 16, 128-token prompts, 64 output tokens,
// best of three trials), plus the modelled communication time per output token.
// Custom on PCIe with tp 8 is forced with REFENGINE_FORCE_CUSTOM_AR=1 (SGLang would refuse it).
func BenchmarkAllReduceMatrix(b *testing.B) {
	for _, topo := range []string{"nvlink", "pcie"} {
		for _, tpn := range []int{2, 8} {
			for _, backend := range []string{"nccl", "custom"} {
				b.Run(fmt.Sprintf("%s/tp%d/%s", topo, tpn, backend), func(b *testing.B) {
					args := []string{"--tp-size", fmt.Sprint(tpn), "--topology", topo}
					env := map[string]string{}
					if backend == "nccl" {
						args = append(args, "--disable-custom-all-reduce")
					} else {
						env[ForceCustomAREnv] = "1"
					}
					ts := start(b, env, true, args...)
					if ts.e.Backend != backend {
						b.Fatalf("backend %s, want %s", ts.e.Backend, backend)
					}
					b.ResetTimer()
					var tps float64
					// best of 3 trials per iteration: the machine is shared, contention only slows down
					for i := 0; i < 3*b.N; i++ {
						tps = max(tps, ts.load(b, matrixConcurrency, 2*matrixConcurrency, 128, 64))
					}
					st := ts.e.Sched.Stats()
					b.ReportMetric(st.CommTime.Seconds()*1e3/float64(max(1, st.GenerationTokensTotal)), "comm_ms/tok")
					b.ReportMetric(tps, "out_tok/s")
					b.ReportMetric(float64(ts.e.Alloc.CapacityTokens()), "kv_tokens")
					b.ReportMetric(float64(ts.e.kvBytes(0))/(1<<30), "kv_GiB")
				})
			}
		}
	}
}

// BenchmarkSpeculative compares EAGLE3 (3 draft steps, 4 draft tokens) with plain decoding at
// concurrency 1 and 8 (64-token prompts, 32 output tokens, best of 3 trials) on tp 4 NVLink (the
// default gate's machine), tp 2 PCIe and tp 8 PCIe with the ring, where modelled allreduce latency
// weighs most.
func BenchmarkSpeculative(b *testing.B) {
	machines := map[string][]string{
		"nvlink-tp4":    {"--tp-size", "4"},
		"pcie-tp2":      {"--tp-size", "2", "--topology", "pcie"},
		"pcie-tp8-ring": {"--tp-size", "8", "--topology", "pcie", "--disable-custom-all-reduce"},
	}
	for _, m := range []string{"nvlink-tp4", "pcie-tp2", "pcie-tp8-ring"} {
		for _, c := range []int{1, 8} {
			for _, spec := range []bool{false, true} {
				args := append([]string{}, machines[m]...)
				name := fmt.Sprintf("%s/c%d/plain", m, c)
				if spec {
					name = fmt.Sprintf("%s/c%d/eagle3", m, c)
					args = append(args, "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4")
				}
				b.Run(name, func(b *testing.B) {
					ts := start(b, nil, true, args...)
					b.ResetTimer()
					var tps float64
					for i := 0; i < 3*b.N; i++ { // best of 3: contention only slows down
						tps = max(tps, ts.load(b, c, 2*c, 64, 32))
					}
					b.ReportMetric(tps, "out_tok/s")
					b.ReportMetric(ts.e.Sched.Stats().AvgAcceptLength(), "accept_len")
				})
			}
		}
	}
}

// matrixConcurrency is the load of BenchmarkAllReduceMatrix.
const matrixConcurrency = 16
