package spec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// badSpecs maps each file of fixtures/specs/bad to the exact errors it must produce, in order.
var badSpecs = []struct {
	name string
	want []string
}{
	{"bad-alias", []string{
		"bad-alias.yaml:5:9: engine.args: alias *base_args names no anchor &base_args",
		"bad-alias.yaml:8:10: configs[0]: merge key << expects a mapping or a list of mappings, got integer 1",
		"bad-alias.yaml:8:13: configs[0]: merge key << expects a mapping or a list of mappings, got integer 2",
	}},
	{"bad-check-fields", []string{
		"bad-check-fields.yaml:15:5: checks[0]: missing required field \"min\" (a lower bound; or max, or both)",
		"bad-check-fields.yaml:17:5: checks[0]: unknown key \"min_ratio\" for a floor check (expected one of: config, configs, kind, max, metric, min, name, tags, workload)",
		"bad-check-fields.yaml:21:10: checks[1].max: max (10) is below min (100)",
		"bad-check-fields.yaml:24:13: checks[2].metric: unknown metric \"output_tput\" (expected one of the metrics reckon's workload produces: " + strings.Join(metricsWhere(IsResultMetric), ", ") + ")",
		"bad-check-fields.yaml:25:17: checks[2].min_effect: expected a percentage such as 5% or a fraction in (0, 1) such as 0.05, got 5 (write 5% for a percentage)",
		"bad-check-fields.yaml:26:12: checks[2].alpha: expected a significance level in (0, 0.5], got 0.9",
		"bad-check-fields.yaml:27:14: checks[2].against: expected baseline, history or config:NAME, got \"nccl\"",
		"bad-check-fields.yaml:28:11: checks[2].test: expected compare or detect, got \"detection\"",
		"bad-check-fields.yaml:29:12: checks[2].power: expected a power of at least 50% (a test that misses a change of min_effect more often than it finds it), got 30%",
		"bad-check-fields.yaml:30:5: checks[3]: missing required field \"file\" (the probe JSON file)",
		"bad-check-fields.yaml:31:19: checks[3].max_abs_err: unknown dtype \"int8\" (expected float32, bfloat16 or float16)",
		"bad-check-fields.yaml:31:34: checks[3].max_abs_err.bf16: expected a tolerance >= 0, got -1",
	}},
	{"bad-duration", []string{
		"bad-duration.yaml:5:18: engine.ready_timeout: expected a duration such as 30s, 2m or 1m30s, got \"10 sec\"",
		"bad-duration.yaml:6:15: engine.stop_grace: expected a duration with a unit such as 30s, 2m or 1m30s, got integer 10",
		"bad-duration.yaml:15:22: workloads[0].request_timeout: expected a positive duration, got \"-5s\"",
	}},
	{"bad-enum", []string{
		"bad-enum.yaml:3:9: engine.kind: expected one of sglang, vllm; got \"sglng\"",
		"bad-enum.yaml:7:25: configs[0].expect.allreduce: expected one of custom, nccl, fused; got \"custom-ar\"",
		"bad-enum.yaml:9:30: configs[1].speculative.algorithm: expected one of EAGLE, EAGLE3, NEXTN, MTP, STANDALONE, NGRAM, MEDUSA; got \"eagle4\"",
		"bad-enum.yaml:11:11: checks[0].kind: expected one of floor, relative, expect, equivalence, allreduce_probe, throughput, latency, error_rate; got \"ceiling\"",
	}},
	{"bad-names", []string{
		"bad-names.yaml:1:7: name: spec name \"bad names\" must start with a letter or digit and hold only letters, digits, '.', '_' and '-' (it names baseline files)",
		"bad-names.yaml:2:17: tags[1]: tag \"a/b\" cannot be a Ginkgo label (it must be non-empty, without surrounding spaces and without any of &|!,()/)",
		"bad-names.yaml:6:9: engine.env: environment variable name \"1BAD\" must be letters, digits and '_', not starting with a digit",
		"bad-names.yaml:6:24: engine.env.GOOD: expected a string, got a list",
		"bad-names.yaml:8:11: configs[0].name: config name \"custom ar\" must start with a letter or digit and hold only letters, digits, '.', '_' and '-' (it names files)",
		"bad-names.yaml:9:11: configs[1].name: must not be empty (a config name)",
	}},
	{"contradictory-expect", []string{
		"contradictory-expect.yaml:9:25: configs[0].expect.allreduce: config custom-ar expects allreduce custom, but disable_custom_all_reduce is true",
		"contradictory-expect.yaml:13:25: configs[1].expect.allreduce: config single-gpu expects allreduce custom, but tp_size is 1 (no allreduce runs without tensor parallelism)",
		"contradictory-expect.yaml:16:12: configs[2].args[0]: --disable-custom-all-reduce is set by the engine adapter; use disable_custom_all_reduce: true",
		"contradictory-expect.yaml:18:5: checks[0]: config forced-off expects allreduce custom, but its args hold --disable-custom-all-reduce",
	}},
	{"dangling-reference", []string{
		"dangling-reference.yaml:17:13: checks[0].config: names no config \"custom_ar\" (did you mean \"custom-ar\"? configs: nccl, custom-ar)",
		"dangling-reference.yaml:23:15: checks[1].workload: names no workload \"prefill\" (workloads: decode)",
		"dangling-reference.yaml:25:14: checks[1].against: names no config \"NCCL\" (did you mean \"nccl\"? configs: nccl, custom-ar)",
	}},
	{"duplicate-config", []string{
		"duplicate-config.yaml:8:11: configs[2].name: duplicate config name \"nccl\" (first defined at line 6)",
	}},
	{"duplicate-key", []string{
		"duplicate-key.yaml:5:3: engine: duplicate key \"model\" (first at line 4)",
		"duplicate-key.yaml:10:7: configs[0].env: duplicate key \"NCCL_DEBUG\" (first at line 9)",
		"duplicate-key.yaml:17:11: checks[1].name: duplicate check name \"kv floor\" (first used at line 12)",
	}},
	{"empty", []string{
		"empty.yaml: empty spec: expected a mapping with name, engine, configs and checks",
	}},
	{"equivalence-calibration", []string{
		"equivalence-calibration.yaml:14:15: numerics.batch_size: expected 0 (no under-load pass) or at least 8 sequences at once, got 1 (the one-at-a-time pass always runs)",
		"equivalence-calibration.yaml:15:20: numerics.prompt_logprobs: removed: every config now scores the same teacher-forced sequences (prompt and continuation), so there is nothing to switch",
		"equivalence-calibration.yaml:20:11: checks[0].twin: twin \"nccl-again\" launches exactly like base \"nccl\": a rerun of the same allreduce is bit-identical and calibrates nothing; give the twin another summation order (e.g. env NCCL_ALGO: Tree)",
		"equivalence-calibration.yaml:25:16: checks[1].max_ratio: max_ratio needs a twin or an oracle to calibrate against (with twin: none the bound is max_distance)",
		"equivalence-calibration.yaml:26:24: checks[1].bitwise_tolerance: bitwise_tolerance needs a twin or an oracle to calibrate against (with twin: none the bound is max_distance)",
		"equivalence-calibration.yaml:31:11: checks[2].twin: twin \"custom-ar\" is also the check's base or head; it must be a third config",
		"equivalence-calibration.yaml:32:19: checks[2].max_distance: max_distance is the uncalibrated bound of `twin: none`; with a twin or oracle (derived when neither is written) the bound is max_ratio",
		"equivalence-calibration.yaml:38:16: checks[3].max_ratio: 0 fails every candidate that differs at all; for an exact comparison set bitwise_tolerance: 0",
	}},
	{"equivalence-without-numerics", []string{
		"equivalence-without-numerics.yaml:9:5: checks[0]: an equivalence check needs a numerics section (the prompts the probe sends)",
		"equivalence-without-numerics.yaml:13:29: checks[0].mean_abs_logprob_delta: mean tolerance (0.5) above the max tolerance (0.1) can never matter",
	}},
	{"managed-flags", []string{
		"managed-flags.yaml:5:10: engine.args[0]: --port is set by the engine adapter; the harness picks host and port",
		"managed-flags.yaml:5:42: engine.args[3]: --tensor-parallel-size is set by the engine adapter; use tp_size",
		"managed-flags.yaml:9:9: configs[0].args[0]: --speculative-config is set by the engine adapter; use speculative",
		"managed-flags.yaml:11:9: configs[0].args[2]: --gpu-memory-utilization is set by the engine adapter; use mem_fraction_static",
	}},
	{"measurement-fields", []string{
		"measurement-fields.yaml:12:15: workloads[0].goodput: unknown key \"ttft\" for goodput SLOs (expected one of: e2el_ms, tpot_ms, ttft_ms)",
		"measurement-fields.yaml:12:35: workloads[0].goodput.tpot_ms: expected a positive number of milliseconds, got -1",
		"measurement-fields.yaml:13:18: workloads[0].temperature: expected a temperature >= 0 (0 = greedy), got -0.5",
		"measurement-fields.yaml:14:12: workloads[0].top_p: expected a probability in (0, 1], got 1.5",
		"measurement-fields.yaml:15:17: workloads[0].ignore_eos: expected true or false, got string \"yes\"",
		"measurement-fields.yaml:16:15: workloads[0].endpoint: expected one of completions, chat; got \"chats\"",
		"measurement-fields.yaml:17:21: workloads[0].configs[1]: names no config \"custom_ar\" (did you mean \"custom-ar\"? configs: nccl, custom-ar)",
		"measurement-fields.yaml:18:5: workloads[1]: missing required field \"output_len\" (the output length in tokens, or a dataset whose records give theirs (ShareGPT replies))",
		"measurement-fields.yaml:27:5: checks[0]: missing required field \"workload\" (the workload whose trials give p99_ttft_ms; required when the spec has more than one workload)",
		"measurement-fields.yaml:32:15: checks[1].workload: kv_cache_tokens is an engine metric, read once per launch; workload applies to result metrics only",
		"measurement-fields.yaml:37:13: checks[2].metric: output_throughput is not produced by the engine report or the GPU sampler (its sources: workload, imported), so this check could never judge it (expected one of the metrics the engine report or the GPU sampler produces: weights_gib, kv_cache_tokens, kv_cache_gib, available_gpu_mem_gib, cuda_graph_seconds, cuda_graph_gib, max_running_requests, context_len, max_concurrency, spec_accept_length, peak_gpu_mem_gib)",
		"measurement-fields.yaml:42:13: checks[3].metric: request_goodput needs goodput SLOs on workload \"sharegpt\" (goodput: {ttft_ms: 500, tpot_ms: 50}); without them no request is judged and the metric is never measured",
		"measurement-fields.yaml:46:13: checks[4].metric: request_goodput needs goodput SLOs on workload \"sharegpt\" (goodput: {ttft_ms: 500, tpot_ms: 50}); without them no request is judged and the metric is never measured",
	}},
	{"missing-required", []string{
		"missing-required.yaml:1:1: missing required field \"name\" (the spec's name, used for baseline file names)",
		"missing-required.yaml:2:3: engine: missing required field \"model\" (a model path or hub id)",
		"missing-required.yaml:4:5: configs[0]: missing required field \"name\" (a config name)",
		"missing-required.yaml:6:5: workloads[0]: missing required field \"concurrency\" (the requests in flight, or request_rate for an open loop)",
		"missing-required.yaml:6:5: workloads[0]: missing required field \"input_len\" (the prompt length in tokens, or a dataset)",
		"missing-required.yaml:6:5: workloads[0]: missing required field \"output_len\" (the output length in tokens, or a dataset whose records give theirs (ShareGPT replies))",
		"missing-required.yaml:9:5: checks[0]: missing required field \"min\" (a lower bound; or max, or both)",
	}},
	{"no-workloads", []string{
		"no-workloads.yaml:8:5: checks[0]: missing required field \"workload\" (a workload name, and a workloads section that defines it)",
	}},
	{"no-configs", []string{
		"no-configs.yaml:5:10: configs: expected at least one config",
	}},
	{"not-a-mapping", []string{
		"not-a-mapping.yaml:1:1: expected a mapping, got a list",
	}},
	{"open-and-closed-loop", []string{
		"open-and-closed-loop.yaml:10:19: workloads[0].request_rate: concurrency and request_rate exclude each other: set one (closed loop) or the other (open loop)",
		"open-and-closed-loop.yaml:16:17: workloads[1].burstiness: applies only to an open loop (set request_rate)",
		"open-and-closed-loop.yaml:21:17: workloads[1].max_trials: expected at least trials (5), got 3",
	}},
	{"self-comparison", []string{
		"self-comparison.yaml:12:9: checks[0].of: a config compared with itself (\"nccl\") always passes; name another config",
		"self-comparison.yaml:17:11: checks[1].head: a config compared with itself (\"nccl\") always passes; name another config",
	}},
	{"syntax-error", []string{
		"syntax-error.yaml:5:1: invalid YAML: ',' or ']' must be specified",
	}},
	{"two-documents", []string{
		"two-documents.yaml:8:1: expected one YAML document, found 2 (remove the extra \"---\")",
	}},
	{"underpowered", []string{
		"underpowered.yaml:18:5: checks[0]: this throughput check can never find a regression: with at most 2 trials per side (workload \"decode\") the smallest p-value of the rank test is 0.167, above its level 0.05; raise trials or max_trials (>= 3)",
	}},
	{"unknown-key", []string{
		"unknown-key.yaml:5:3: engine: unknown key \"tp_sise\" (did you mean \"tp_size\"?)",
		"unknown-key.yaml:8:5: configs[0]: unknown key \"disable_custom_allreduce\" (did you mean \"disable_custom_all_reduce\"?)",
	}},
	{"wrong-type", []string{
		"wrong-type.yaml:5:12: engine.tp_size: expected an integer, got string \"four\"",
		"wrong-type.yaml:6:24: engine.mem_fraction_static: expected a number, got string \"0.8\"",
		"wrong-type.yaml:9:11: configs[0].args: expected a list of strings, got string \"--foo\"",
		"wrong-type.yaml:10:24: configs[0].cuda_graph_max_bs: expected an integer, got number 8.5",
	}},
}

func TestBadSpecs(t *testing.T) {
	files, err := filepath.Glob("../fixtures/specs/bad/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, tc := range badSpecs {
		covered[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("../fixtures/specs/bad", tc.name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			s, err := Parse(data, tc.name+".yaml")
			if err == nil {
				t.Fatalf("Parse accepted a bad spec: %+v", s)
			}
			if s != nil {
				t.Errorf("Parse returned a spec along with errors")
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, want ErrorList: %v", err, err)
			}
			got := strings.Split(err.Error(), "\n")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			// Every entry is an *Error with a position (except for an empty file).
			for _, e := range list {
				if e.Line == 0 && tc.name != "empty" {
					t.Errorf("error without a position: %v", e)
				}
			}
		})
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if !covered[name] {
			t.Errorf("fixtures/specs/bad/%s.yaml has no entry in badSpecs", name)
		}
	}
}
