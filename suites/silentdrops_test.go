package suites

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/engine"
	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/reporters"
	"github.com/reckon-ci/reckon/spec"
)

// TestSilentDropsAreErrorsOrInEffect covers every spec value that used to be accepted and then
// ignored (issue 16): each is now rejected with its file:line, or takes effect. Each row is shown
// both ways: the value that must be rejected (or must change the verdict), and the good case.
func TestSilentDropsAreErrorsOrInEffect(t *testing.T) {
	probe := filepath.Join("..", "gate", "testdata", "allreduce", "refengine-tp8.json")
	raw, err := os.ReadFile(probe)
	if err != nil {
		t.Fatal(err)
	}
	// The same probe without one max_rel_err: `reckon probe check` rejects it, so must the gate.
	noRel := filepath.Join(t.TempDir(), "no-max-rel-err.json")
	stripped := regexp.MustCompile(`"max_rel_err": [^,]+,\s*`).ReplaceAll(raw, nil)
	if err := os.WriteFile(noRel, stripped, 0o644); err != nil {
		t.Fatal(err)
	}

	const vllmHead = "name: s\nengine:\n  kind: vllm\n  model: m\n  tp_size: 2\nconfigs:\n  - name: a\n  - name: b\n"
	const sglangHead = "name: s\nengine:\n  kind: sglang\n  model: m\n  tp_size: 2\nconfigs:\n  - name: a\n  - name: b\n"
	specRows := []struct {
		name, yaml string
		want       string // "" = accepted; else a substring of the one error, which also names file:line:col
	}{
		{"vllm floor on available_gpu_mem_gib (never logged)", vllmHead + "checks:\n  - kind: floor\n    metric: available_gpu_mem_gib\n    max: 0.5\n",
			":11:13: checks[0].metric: vllm's logs never report available_gpu_mem_gib"},
		{"vllm floor on kv_cache_tokens", vllmHead + "checks:\n  - kind: floor\n    metric: kv_cache_tokens\n    min: 1\n", ""},
		{"sglang relative on max_concurrency (never logged)", sglangHead + "checks:\n  - kind: relative\n    config: a\n    of: b\n    metric: max_concurrency\n    min_ratio: 0.9\n",
			":13:13: checks[0].metric: sglang's logs never report max_concurrency"},
		{"sglang floor on available_gpu_mem_gib", sglangHead + "checks:\n  - kind: floor\n    metric: available_gpu_mem_gib\n    max: 0.5\n", ""},
		{"vllm num_draft_tokens beside num_steps (dropped)", "name: s\nengine:\n  kind: vllm\n  model: m\n  tp_size: 2\nconfigs:\n  - name: a\n  - name: e\n    speculative: {algorithm: EAGLE3, draft_model: d, num_steps: 3, num_draft_tokens: 8}\n",
			":8:1: configs[1].speculative.num_draft_tokens: config e: num_draft_tokens 8 with num_steps 3"},
		{"vllm num_draft_tokens = num_steps + 1 (the same chain)", "name: s\nengine:\n  kind: vllm\n  model: m\n  tp_size: 2\nconfigs:\n  - name: a\n  - name: e\n    speculative: {algorithm: EAGLE3, draft_model: d, num_steps: 3, num_draft_tokens: 4}\n", ""},
		{"vllm num_draft_tokens alone (mapped)", "name: s\nengine:\n  kind: vllm\n  model: m\n  tp_size: 2\nconfigs:\n  - name: a\n  - name: e\n    speculative: {algorithm: EAGLE3, draft_model: d, num_draft_tokens: 3}\n", ""},
	}
	for _, r := range specRows {
		t.Run(r.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.yaml")
			if err := os.WriteFile(path, []byte(r.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := spec.Load(path)
			if err != nil {
				t.Fatalf("spec does not load: %v", err)
			}
			got := EngineProblems(s)
			switch {
			case r.want == "" && len(got) > 0:
				t.Errorf("rejected a value that takes effect: %v", got)
			case r.want != "" && (len(got) != 1 || !strings.Contains(got[0].Error(), path+r.want)):
				t.Errorf("got %v, want one error containing %q", got, path+r.want)
			}
		})
	}

	probeRows := []struct {
		name  string
		check spec.Check
		want  gate.Outcome
		msg   string
	}{
		{"probe within the defaults", spec.Check{Name: "p", Kind: spec.KindAllReduceProbe, Params: &spec.AllReduceProbeParams{File: probe}}, gate.Pass, "within tolerance"},
		{"max_abs_err tighter than the probe's errors", spec.Check{Name: "p", Kind: spec.KindAllReduceProbe, Params: &spec.AllReduceProbeParams{File: probe, MaxAbsErr: map[string]float64{"float32": 1e-9}}}, gate.Fail, "max_abs_err"},
		{"max_abs_err looser than the probe's errors", spec.Check{Name: "p", Kind: spec.KindAllReduceProbe, Params: &spec.AllReduceProbeParams{File: probe, MaxAbsErr: map[string]float64{"float32": 1, "bfloat16": 1}}}, gate.Pass, "within tolerance"},
		{"max_rel_err tighter than the probe's errors", spec.Check{Name: "p", Kind: spec.KindAllReduceProbe, Params: &spec.AllReduceProbeParams{File: probe, MaxRelErr: map[string]float64{"float32": 1e-12}}}, gate.Fail, "max_rel_err"},
		{"algorithms names one the probe never ran", spec.Check{Name: "p", Kind: spec.KindAllReduceProbe, Params: &spec.AllReduceProbeParams{File: probe, Algorithms: []string{"two_shot"}}}, gate.Error, "algorithms names two_shot, which the probe did not run"},
		{"algorithms selects what is judged", spec.Check{Name: "p", Kind: spec.KindAllReduceProbe, Params: &spec.AllReduceProbeParams{File: probe, Algorithms: []string{"one_shot"}, MaxRelErr: map[string]float64{"float32": 1.1e-7}}}, gate.Fail, "one_shot"},
		{"a probe file without max_rel_err (strict reader)", spec.Check{Name: "p", Kind: spec.KindAllReduceProbe, Params: &spec.AllReduceProbeParams{File: noRel}}, gate.Error, "max_rel_err"},
	}
	for _, r := range probeRows {
		t.Run(r.name, func(t *testing.T) {
			v := probeVerdict(nil, &r.check)
			if v.Outcome != r.want || !strings.Contains(v.Message, r.msg) {
				t.Errorf("outcome %s message %q; want %s containing %q", v.Outcome, v.Message, r.want, r.msg)
			}
		})
	}
	// The algorithms row above fails on one_shot only because ring is not judged: with ring
	// judged too, its own error must show up as well (a failure count of 2 or more).
	all := probeVerdict(nil, &spec.Check{Name: "p", Kind: spec.KindAllReduceProbe, Params: &spec.AllReduceProbeParams{File: probe, MaxRelErr: map[string]float64{"float32": 1e-12}}})
	only := probeVerdict(nil, &spec.Check{Name: "p", Kind: spec.KindAllReduceProbe, Params: &spec.AllReduceProbeParams{File: probe, Algorithms: []string{"one_shot"}, MaxRelErr: map[string]float64{"float32": 1e-12}}})
	if all.Metrics["algorithm_runs"] <= only.Metrics["algorithm_runs"] {
		t.Errorf("algorithms did not narrow what is judged: %v runs with every algorithm, %v with one_shot", all.Metrics["algorithm_runs"], only.Metrics["algorithm_runs"])
	}

	t.Run("the baseline's engine report explains a regression against it", func(t *testing.T) {
		run := &gate.Run{Configs: []gate.Config{{Name: "a", Engine: map[string]any{"kv_cache_gib": 0.9, "kv_cache_tokens": 9000.0}}, {Name: "b"}}}
		b := &gate.Baseline{Configs: []gate.BaselineConfig{{Name: "a", Engine: map[string]any{"kv_cache_gib": 10.42, "kv_cache_tokens": 104200.0}}}}
		attachBaselineEngines(run, b)
		if run.Configs[0].BaselineEngine == nil || run.Configs[1].BaselineEngine != nil {
			t.Fatalf("baseline engines: %+v", run.Configs)
		}
		c := gate.Check{Verdict: gate.Verdict{Name: "t", Kind: string(spec.KindThroughput), Config: "a", Outcome: gate.Fail, Stat: &gate.StatResult{Metric: "output_throughput", Outcome: gate.Regression}}, Status: gate.StatusFailed}
		if ex := reporters.Explain(run, &c); !strings.Contains(ex, "KV cache") {
			t.Errorf("no KV explanation against the baseline: %q", ex)
		}
	})
}

// TestReportedMetricsMatchParsers pins ReportedMetrics to what each adapter's log parser gives:
// every metric listed is reported by at least one log sample of that engine under fixtures/logs
// (or is named in withoutSample, with the log line that gives it), and every EngineReport metric
// a sample reports is listed.
func TestReportedMetricsMatchParsers(t *testing.T) {
	withoutSample := map[string]string{
		"vllm/max_running_requests": "max_num_seqs=N in vLLM's engine config line (engine/vllm/parse.go maxSeqsRE)",
	}
	for _, kind := range []string{"sglang", "vllm"} {
		files, _ := filepath.Glob(filepath.Join("..", "fixtures", "logs", kind, "*.log"))
		if len(files) == 0 {
			t.Fatalf("no %s log samples", kind)
		}
		seen := map[string]bool{}
		for _, f := range files {
			rep, err := engine.ParseLogFile(f, kind)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for _, m := range spec.EngineMetrics {
				if reportedValue(rep, m) {
					seen[m] = true
				}
			}
		}
		listed, _ := ReportedMetrics(kind)
		want := map[string]bool{}
		for _, m := range listed {
			want[m] = true
			if !seen[m] && withoutSample[kind+"/"+m] == "" {
				t.Errorf("%s: %s is listed as reported but no log sample gives it", kind, m)
			}
		}
		for m := range seen {
			if !want[m] {
				t.Errorf("%s: the parser reports %s but ReportedMetrics does not list it (spec check would reject a valid floor)", kind, m)
			}
		}
	}
}

// reportedValue reports whether the engine report holds a value for the metric (by its JSON key).
func reportedValue(rep *engine.Report, metric string) bool {
	fields := map[string]bool{
		"weights_gib": rep.WeightsGiB != nil, "kv_cache_tokens": rep.KVCacheTokens != nil, "kv_cache_gib": rep.KVCacheGiB != nil,
		"available_gpu_mem_gib": rep.AvailableGPUMemGiB != nil, "cuda_graph_seconds": rep.CUDAGraphSeconds != nil,
		"cuda_graph_gib": rep.CUDAGraphGiB != nil, "max_running_requests": rep.MaxRunningRequests != nil,
		"context_len": rep.ContextLen != nil, "max_concurrency": rep.MaxConcurrency != nil, "spec_accept_length": rep.SpecAcceptLength != nil,
	}
	return fields[metric]
}
