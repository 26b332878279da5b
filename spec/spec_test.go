package spec

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const fullSpec = `name: default
description: every feature once
tags: [nightly, premerge]
engine:
  kind: sglang
  command: [bin/refengine, serve]
  model: fixtures/models/tiny.json
  tp_size: 4
  mem_fraction_static: 0.85
  args: [--device-memory, 1GiB, --seed, 7]
  env: {REFENGINE_X: 1, SHARED: base, QUOTED: !!str 5}
  ready_timeout: 60s
  stop_grace: 5s
x-allreduce: &ar
  tags: [allreduce]
configs:
  - name: nccl
    <<: *ar
    disable_custom_all_reduce: true
    expect: {allreduce: nccl}
  - name: custom-ar
    <<: *ar
    tags: [custom]
    args: [--custom-ar-algo, one_shot]
    env: {SHARED: config}
    expect: {allreduce: custom}
  - name: eagle3
    speculative: {algorithm: eagle3, draft_model: d, num_steps: 3, eagle_topk: 1, num_draft_tokens: 4}
  - name: graph-bs-8
    cuda_graph_max_bs: 8
    tp_size: 2
    mem_fraction_static: 0.5
    tags: [nightly]
workloads:
  - name: decode
    concurrency: 8
    num_prompts: 64
    input_len: 128
    output_len: 64
    warmup: 4
    trials: 5
    max_trials: 10
    seed: 42
    request_timeout: 60s
  - name: poisson
    request_rate: 20.5
    num_prompts: 64
    dataset: fixtures/datasets/sharegpt.jsonl
    output_len: 64
numerics:
  prompts: fixtures/prompts/numerics.jsonl
checks:
  - kind: floor
    configs: [nccl, custom-ar]
    metric: kv_cache_tokens
    min: 10000
  - kind: floor
    metric: available_gpu_mem_gib
    max: 2.5
  - kind: floor
    config: eagle3
    metric: spec_accept_length
    min: 1.5
    max: 5
  - kind: relative
    config: custom-ar
    of: nccl
    metric: kv_cache_tokens
    min_ratio: 0.9
  - kind: equivalence
    base: nccl
    head: custom-ar
    max_abs_logprob_delta: 0.5
    mean_abs_logprob_delta: 0.05
    min_exact_match: 0.8
  - kind: allreduce_probe
    file: fixtures/probes/x.json
    algorithms: [one_shot]
    max_abs_err: {bf16: 0.02, FP32: 0}
    max_rel_err: {half: 0.001}
  - kind: throughput
    config: custom-ar
    workload: decode
    metric: output_throughput
    against: config:nccl
    min_effect: 2.5%
    alpha: 0.01
  - kind: latency
    name: ttft vs baseline
    tags: [premerge]
    config: custom-ar
    workload: decode
    metric: p99_ttft_ms
    min_effect: 0.1
`

func mustParse(t *testing.T, src string) *Spec {
	t.Helper()
	s, err := Parse([]byte(src), "test.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func fptr(f float64) *float64 { return &f }
func iptr(i int) *int         { return &i }

func TestParseFullSpec(t *testing.T) {
	s := mustParse(t, fullSpec)
	if s.Name != "default" || s.File != "test.yaml" {
		t.Errorf("name/file = %q/%q", s.Name, s.File)
	}
	// nccl-twin is the twin reckon derives for "equivalence custom-ar vs nccl", which names none.
	if diff := cmp.Diff([]string{"nccl", "custom-ar", "eagle3", "graph-bs-8", "nccl-twin"}, s.ConfigNames()); diff != "" {
		t.Errorf("configs (-want +got):\n%s", diff)
	}
	wantTwins := []DerivedTwin{{Config: "nccl-twin", Base: "nccl", Reason: "nccl with NCCL_ALGO=Tree (NCCL summing in another order)"}}
	if diff := cmp.Diff(wantTwins, s.DerivedTwins); diff != "" {
		t.Errorf("derived twins (-want +got):\n%s", diff)
	}
	wantEngine := Engine{
		Kind: "sglang", Command: []string{"bin/refengine", "serve"}, Model: "fixtures/models/tiny.json",
		TPSize: 4, MemFractionStatic: fptr(0.85), Args: []string{"--device-memory", "1GiB", "--seed", "7"},
		Env:          map[string]string{"REFENGINE_X": "1", "SHARED": "base", "QUOTED": "5"},
		ReadyTimeout: Duration(time.Minute), StopGrace: Duration(5 * time.Second),
	}
	if diff := cmp.Diff(wantEngine, s.Engine); diff != "" {
		t.Errorf("engine (-want +got):\n%s", diff)
	}
	wantWorkloads := []*Workload{
		{Name: "decode", Concurrency: 8, NumPrompts: 64, InputLen: 128, OutputLen: 64, Warmup: 4, Trials: 5, MaxTrials: 10, Seed: 42, RequestTimeout: Duration(time.Minute), IgnoreEOS: true, Line: 35},
		{Name: "poisson", RequestRate: 20.5, Burstiness: 1, NumPrompts: 64, Dataset: "fixtures/datasets/sharegpt.jsonl", OutputLen: 64, Trials: DefaultTrials, MaxTrials: DefaultTrials, Seed: DefaultSeed, RequestTimeout: Duration(DefaultRequestTimeout), IgnoreEOS: true, Line: 45},
	}
	if diff := cmp.Diff(wantWorkloads, s.Workloads); diff != "" {
		t.Errorf("workloads (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&Numerics{Prompts: "fixtures/prompts/numerics.jsonl", MaxTokens: 32, TopLogprobs: 5, BatchSize: DefaultProbeBatch}, s.Numerics); diff != "" {
		t.Errorf("numerics (-want +got):\n%s", diff)
	}
	var names []string
	for _, c := range s.Checks {
		names = append(names, c.Name)
	}
	wantNames := []string{
		"floor kv_cache_tokens >= 10000",
		"floor available_gpu_mem_gib <= 2.5",
		"floor 1.5 <= spec_accept_length <= 5",
		"relative custom-ar kv_cache_tokens >= 0.9 x nccl",
		"equivalence custom-ar vs nccl",
		"allreduce_probe fixtures/probes/x.json [one_shot]",
		"throughput custom-ar decode output_throughput vs nccl",
		"ttft vs baseline",
		"expect nccl allreduce == nccl",
		"expect custom-ar allreduce == custom",
	}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("check names (-want +got):\n%s", diff)
	}
	floorAll, _ := s.Check("floor available_gpu_mem_gib <= 2.5")
	if diff := cmp.Diff(s.ConfigNames()[:4], floorAll.Floor().Configs); diff != "" {
		t.Errorf("a floor without configs applies to all (-want +got):\n%s", diff)
	}
	eqc, _ := s.Check("equivalence custom-ar vs nccl")
	eq := eqc.Equivalence()
	if eq.TopK != 5 || *eq.MaxAbsLogprobDelta != 0.5 || *eq.MeanAbsLogprobDelta != 0.05 || *eq.MinExactMatch != 0.8 || eq.MaxRatio != nil || eq.MaxDistance != nil {
		t.Errorf("equivalence = %+v", eq)
	}
	probec, _ := s.Check("allreduce_probe fixtures/probes/x.json [one_shot]")
	probe := probec.Probe()
	if diff := cmp.Diff(map[string]float64{"bfloat16": 0.02, "float32": 0}, probe.MaxAbsErr); diff != "" {
		t.Errorf("max_abs_err (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"float16": 0.001}, probe.MaxRelErr); diff != "" {
		t.Errorf("max_rel_err (-want +got):\n%s", diff)
	}
	tpc, _ := s.Check("throughput custom-ar decode output_throughput vs nccl")
	tp := tpc.Stat()
	if tp.Against != AgainstConfig || tp.AgainstConfig != "nccl" || tp.MinEffect != 0.025 || tp.Alpha != 0.01 {
		t.Errorf("throughput = %+v", tp)
	}
	latc, _ := s.Check("ttft vs baseline")
	if lat := latc.Stat(); lat.Against != AgainstBaseline || lat.MinEffect != 0.1 || lat.Alpha != DefaultAlpha || !latc.IsStatistical() {
		t.Errorf("latency = %+v", lat)
	}
	eagle, _ := s.Config("eagle3")
	if diff := cmp.Diff(&Speculative{Algorithm: "EAGLE3", DraftModel: "d", NumSteps: 3, EagleTopK: 1, NumDraftTokens: 4}, eagle.Speculative); diff != "" {
		t.Errorf("speculative (-want +got):\n%s", diff)
	}
}

func TestResolved(t *testing.T) {
	s := mustParse(t, fullSpec)
	got, err := s.Resolved("custom-ar")
	if err != nil {
		t.Fatal(err)
	}
	want := Launch{
		Config: "custom-ar", Kind: "sglang", Command: []string{"bin/refengine", "serve"}, Model: "fixtures/models/tiny.json",
		TPSize: 4, MemFractionStatic: fptr(0.85),
		Args:         []string{"--device-memory", "1GiB", "--seed", "7", "--custom-ar-algo", "one_shot"},
		Env:          map[string]string{"REFENGINE_X": "1", "SHARED": "config", "QUOTED": "5"},
		ReadyTimeout: Duration(time.Minute), StopGrace: Duration(5 * time.Second),
		Expect: Expect{AllReduce: "custom"},
		Tags:   []string{"nightly", "premerge", "custom"}, // explicit tags replace the merged ones
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Resolved(custom-ar) (-want +got):\n%s", diff)
	}
	g, _ := s.Resolved("graph-bs-8")
	if g.TPSize != 2 || *g.MemFractionStatic != 0.5 || *g.CudaGraphMaxBS != 8 || g.DisableCustomAllReduce {
		t.Errorf("Resolved(graph-bs-8) = %+v", g)
	}
	n, _ := s.Resolved("nccl")
	if !n.DisableCustomAllReduce || n.Env["SHARED"] != "base" {
		t.Errorf("Resolved(nccl) = %+v", n)
	}
	// Resolving must not alias the spec's slices and maps.
	got.Args[0] = "changed"
	got.Env["SHARED"] = "changed"
	if s.Engine.Args[0] != "--device-memory" || s.Engine.Env["SHARED"] != "base" {
		t.Error("Resolved shares memory with the spec")
	}
	if _, err := s.Resolved("nope"); err == nil || !strings.Contains(err.Error(), `no config "nope"`) {
		t.Errorf("Resolved(nope) error = %v", err)
	}
}

func TestHelpers(t *testing.T) {
	s := mustParse(t, fullSpec)
	namesOf := func(cs []*Check) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	if diff := cmp.Diff([]string{"floor kv_cache_tokens >= 10000", "floor available_gpu_mem_gib <= 2.5", "expect custom-ar allreduce == custom"}, namesOf(s.ChecksFor("custom-ar"))); diff != "" {
		t.Errorf("ChecksFor(custom-ar) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"floor available_gpu_mem_gib <= 2.5", "floor 1.5 <= spec_accept_length <= 5"}, namesOf(s.ChecksFor("eagle3"))); diff != "" {
		t.Errorf("ChecksFor(eagle3) (-want +got):\n%s", diff)
	}
	// Cross-config is where a check is judged (once after every config): the probe file and
	// the check against the baseline too, as the runner, sharding and merge judge them.
	if diff := cmp.Diff([]string{"relative custom-ar kv_cache_tokens >= 0.9 x nccl", "equivalence custom-ar vs nccl", "allreduce_probe fixtures/probes/x.json [one_shot]", "throughput custom-ar decode output_throughput vs nccl", "ttft vs baseline"}, namesOf(s.CrossChecks())); diff != "" {
		t.Errorf("CrossChecks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"throughput custom-ar decode output_throughput vs nccl", "ttft vs baseline"}, namesOf(s.StatisticalChecks())); diff != "" {
		t.Errorf("StatisticalChecks (-want +got):\n%s", diff)
	}
	if !s.NeedsNumerics("nccl") || !s.NeedsNumerics("custom-ar") || s.NeedsNumerics("eagle3") {
		t.Error("NeedsNumerics wrong")
	}
	if w := s.WorkloadsFor("nccl"); len(w) != 1 || w[0].Name != "decode" {
		t.Errorf("WorkloadsFor(nccl) = %v", w)
	}
	if w := s.WorkloadsFor("eagle3"); len(w) != 0 {
		t.Errorf("WorkloadsFor(eagle3) = %v", w)
	}
	if diff := cmp.Diff([]string{"output_throughput", "p99_ttft_ms"}, s.MetricsFor("custom-ar", "decode")); diff != "" {
		t.Errorf("MetricsFor (-want +got):\n%s", diff)
	}
	tp, _ := s.Check("throughput custom-ar decode output_throughput vs nccl")
	if diff := cmp.Diff([]string{"custom-ar", "nccl"}, tp.ConfigNames()); diff != "" || tp.Scope() != ScopeCross {
		t.Errorf("ConfigNames = %v, scope = %v", tp.ConfigNames(), tp.Scope())
	}
	lat, _ := s.Check("ttft vs baseline")
	if lat.Scope() != ScopeCross || len(lat.ConfigNames()) != 1 {
		t.Errorf("a check against the baseline is judged after every config, on its one config: scope %v, configs %v", lat.Scope(), lat.ConfigNames())
	}
	floor, _ := s.Check("floor kv_cache_tokens >= 10000")
	if floor.Scope() != ScopePerConfig || len(floor.ConfigNames()) != 2 {
		t.Errorf("a floor over two configs judges each alone: scope %v, configs %v", floor.Scope(), floor.ConfigNames())
	}
	for _, c := range s.CrossChecks() {
		if c.Scope() != ScopeCross {
			t.Errorf("CrossChecks holds %q, which is %v", c.Name, c.Scope())
		}
	}
	if diff := cmp.Diff([]string{"nightly", "premerge"}, s.Labels("graph-bs-8")); diff != "" {
		t.Errorf("Labels (-want +got):\n%s", diff)
	}
}

func TestGeneratedNamesAreUniqueAndExplicitExpectWins(t *testing.T) {
	s := mustParse(t, `name: n
engine: {kind: vllm, model: m, tp_size: 2}
configs:
  - {name: a, expect: {allreduce: custom}}
  - {name: b, expect: {allreduce: nccl}}
checks:
  - {kind: floor, configs: [a], metric: kv_cache_gib, min: 1}
  - {kind: floor, configs: [b], metric: kv_cache_gib, min: 1}
  - {kind: floor, name: "floor kv_cache_gib >= 1 #2", configs: [b], metric: kv_cache_gib, min: 2}
  - {kind: expect, config: a, allreduce: custom}
`)
	var names []string
	for _, c := range s.Checks {
		names = append(names, c.Name)
	}
	want := []string{"floor kv_cache_gib >= 1", "floor kv_cache_gib >= 1 #3", "floor kv_cache_gib >= 1 #2", "expect a allreduce == custom", "expect b allreduce == nccl"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if s.Checks[3].Implicit || !s.Checks[4].Implicit {
		t.Errorf("implicit flags wrong: %+v %+v", s.Checks[3], s.Checks[4])
	}
}

func TestSingleWorkloadIsTheDefault(t *testing.T) {
	s := mustParse(t, `name: n
engine: {kind: sglang, model: m}
configs: [{name: a}]
workloads: [{name: w, concurrency: 1, num_prompts: 1, input_len: 1, output_len: 1}]
checks: [{kind: throughput, config: a, metric: request_throughput}]
`)
	if c := s.Checks[0].Stat(); c.Workload != "w" || c.Against != AgainstBaseline || c.MinEffect != DefaultMinEffect {
		t.Errorf("check = %+v", c)
	}
}

func TestMinRankP(t *testing.T) {
	for n, want := range map[int]float64{1: 0.5, 3: 0.05, 5: 1.0 / 252, 10: 1.0 / 184756} {
		if got := minRankP(n); got < want*0.999999 || got > want*1.000001 {
			t.Errorf("minRankP(%d) = %g, want %g", n, got, want)
		}
	}
	if got := minTrialsFor(0.01); got != 5 {
		t.Errorf("minTrialsFor(0.01) = %d, want 5", got)
	}
	if got := minTrialsFor(0.05); got != 3 {
		t.Errorf("minTrialsFor(0.05) = %d, want 3", got)
	}
}

func TestResultMetrics(t *testing.T) {
	for _, m := range []string{"output_throughput", "median_ttft_ms", "p99_tpot_ms", "std_e2el_ms", "request_goodput", "spec_accept_length", "failed"} {
		if !IsResultMetric(m) {
			t.Errorf("IsResultMetric(%q) = false", m)
		}
	}
	// Not measured by reckon's workload (p99.9_itl_ms and mean_e2e_latency_ms are other tools'
	// keys, known only from imported results), or without a direction (peak_in_flight).
	for _, m := range []string{"ttft", "p999_ttft_ms_x", "kv_cache_tokens", "median_ttft", "", "p99.9_itl_ms", "mean_e2e_latency_ms",
		"p75_tpot_ms", "p99_e2e_ms", "goodput", "total_throughput", "input_throughput", "peak_in_flight", "max_concurrency"} {
		if IsResultMetric(m) {
			t.Errorf("IsResultMetric(%q) = true", m)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(p, []byte("name: x\nengine: {kind: sglang, model: m}\nconfigs: [{name: a}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(p)
	if err != nil || s.File != p {
		t.Fatalf("Load = %v, %v", s, err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
	// The error names the file and every problem; errors.As finds each one.
	if err := os.WriteFile(p, []byte("name: x\nengine: {kind: tgi, model: m, tp_size: 0}\nconfigs: [{name: a}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(p)
	var e *Error
	if !errors.As(err, &e) || e.File != p || e.Line != 2 {
		t.Fatalf("Load(bad) = %v", err)
	}
	if got := len(err.(ErrorList)); got != 2 {
		t.Errorf("got %d errors, want 2: %v", got, err)
	}
}

func TestDurationJSON(t *testing.T) {
	b, err := json.Marshal(Duration(90 * time.Second))
	if err != nil || string(b) != `"1m30s"` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var d Duration
	if err := json.Unmarshal(b, &d); err != nil || d.D() != 90*time.Second {
		t.Fatalf("Unmarshal = %v, %v", d, err)
	}
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil {
		t.Error("Unmarshal accepted a bad duration")
	}
}

func TestMinEffectForms(t *testing.T) {
	const head = "name: n\nengine: {kind: sglang, model: m}\nconfigs: [{name: a}]\nworkloads: [{name: w, concurrency: 1, num_prompts: 1, input_len: 1, output_len: 1}]\nchecks: [{kind: throughput, config: a, metric: output_throughput, min_effect: %s}]\n"
	for in, want := range map[string]float64{`2.5%`: 0.025, `"5 %"`: 0.05, `0.1`: 0.1, `1e-2`: 0.01, `1.0e-2`: 0.01} {
		s, err := Parse([]byte(strings.Replace(head, "%s", in, 1)), "t.yaml")
		if err != nil {
			t.Errorf("min_effect %s: %v", in, err)
			continue
		}
		if got := s.Checks[0].Stat().MinEffect; got < want-1e-12 || got > want+1e-12 {
			t.Errorf("min_effect %s = %v, want %v", in, got, want)
		}
	}
	for in, want := range map[string]string{
		`150%`:   `t.yaml:5:79: checks[0].min_effect: expected a percentage such as 5% or a fraction in (0, 1) such as 0.05, got 1.5`,
		`0`:      `t.yaml:5:79: checks[0].min_effect: expected a percentage such as 5% or a fraction in (0, 1) such as 0.05, got 0`,
		`"1e-2"`: `t.yaml:5:79: checks[0].min_effect: expected a percentage such as 5% or a fraction in (0, 1) such as 0.05, got "1e-2"`,
		`x%`:     `t.yaml:5:79: checks[0].min_effect: expected a percentage such as 5% or a fraction in (0, 1) such as 0.05, got "x%"`,
		`[5]`:    `t.yaml:5:79: checks[0].min_effect: expected a percentage such as 5% or a fraction in (0, 1) such as 0.05, got a list`,
	} {
		_, err := Parse([]byte(strings.Replace(head, "%s", in, 1)), "t.yaml")
		if err == nil || err.Error() != want {
			t.Errorf("min_effect %s: %v\nwant %s", in, err, want)
		}
	}
}

// FuzzParse: whatever the bytes, Parse returns a spec or errors, never panics, and every error
// has the file name.
func FuzzParse(f *testing.F) {
	f.Add([]byte(fullSpec))
	files, _ := filepath.Glob("../fixtures/specs/bad/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "f.yaml")
		if (s == nil) == (err == nil) {
			t.Fatalf("spec %v with error %v", s, err)
		}
		if err != nil {
			for _, e := range err.(ErrorList) {
				if e.File != "f.yaml" || e.Msg == "" {
					t.Fatalf("bad error %#v", e)
				}
			}
		}
	})
}

func BenchmarkParse(b *testing.B) {
	data := []byte(fullSpec)
	for b.Loop() {
		if _, err := Parse(data, "bench.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}
