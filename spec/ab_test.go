package spec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// abSpec is a pre-merge A/B: two builds of the engine as two configs of one run, relaunched.
const abSpec = `name: ab
engine:
  kind: sglang
  command: [bin/refengine]
  model: fixtures/models/tiny.json
  args: [--device-memory, 1GiB]
  env: {SHARED: base}
configs:
  - name: main
    command: [/opt/main/bin/refengine, serve]
  - name: pr
    command: [/opt/pr/bin/refengine]
    model: fixtures/models/other.json
    args: [--fault-slowdown, "2"]
    env: {SHARED: pr, ONLY_PR: "1"}
  - name: inherits
workloads:
  - name: decode
    concurrency: 2
    num_prompts: 4
    input_len: 8
    output_len: 8
    trials: 2
    launches: 3
checks:
  - kind: throughput
    config: pr
    metric: output_throughput
    against: config:main
`

func TestConfigCommandModelEnvArgs(t *testing.T) {
	s := mustParse(t, abSpec)
	main, err := s.Resolved("main")
	if err != nil {
		t.Fatal(err)
	}
	pr, _ := s.Resolved("pr")
	inh, _ := s.Resolved("inherits")
	if diff := cmp.Diff([]string{"/opt/main/bin/refengine", "serve"}, main.Command); diff != "" {
		t.Errorf("main command (-want +got):\n%s", diff)
	}
	if main.Model != "fixtures/models/tiny.json" {
		t.Errorf("main model %q, want the engine's", main.Model)
	}
	if diff := cmp.Diff(Launch{
		Config: "pr", Kind: "sglang", Command: []string{"/opt/pr/bin/refengine"}, Model: "fixtures/models/other.json", TPSize: 1,
		Args: []string{"--device-memory", "1GiB", "--fault-slowdown", "2"}, Env: map[string]string{"SHARED": "pr", "ONLY_PR": "1"},
		ReadyTimeout: Duration(DefaultReadyTimeout), StopGrace: Duration(DefaultStopGrace),
	}, pr); diff != "" {
		t.Errorf("pr launch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"bin/refengine"}, inh.Command); diff != "" {
		t.Errorf("inherited command (-want +got):\n%s", diff)
	}
	if w, _ := s.Workload("decode"); w.Launches != 3 || w.Trials != 2 || w.MaxTrials != 2 {
		t.Errorf("workload launches %d trials %d max_trials %d", w.Launches, w.Trials, w.MaxTrials)
	}
}

// TestEngineModelOptionalWhenEveryConfigHasOne: engine.model is needed only by configs without
// their own.
func TestEngineModelOptionalWhenEveryConfigHasOne(t *testing.T) {
	ok := `name: m
engine: {kind: sglang}
configs: [{name: a, model: x}, {name: b, model: y}]
`
	s := mustParse(t, ok)
	if l, _ := s.Resolved("b"); l.Model != "y" {
		t.Errorf("model %q", l.Model)
	}
	_, err := Parse([]byte(`name: m
engine: {kind: sglang}
configs: [{name: a, model: x}, {name: b}]
`), "m.yaml")
	if err == nil || !strings.Contains(err.Error(), `m.yaml:2:10: engine: missing required field "model" (a model path or hub id)`) {
		t.Errorf("err = %v", err)
	}
}

func TestLaunchesDefaultsAndErrors(t *testing.T) {
	s := mustParse(t, strings.Replace(strings.Replace(abSpec, "    launches: 3\n", "", 1), "trials: 2", "trials: 3", 1))
	if w, _ := s.Workload("decode"); w.LaunchCount() != 1 || w.Launches != 0 {
		t.Errorf("default launches %d, want 1", w.Launches)
	}
	// A baseline recorded with launches keeps them: a check against it is valid with launches.
	if _, err := Parse([]byte(strings.Replace(abSpec, "against: config:main", "against: baseline", 1)), "ab.yaml"); err != nil {
		t.Errorf("against baseline with launches: %v", err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"zero", "launches: 3", "launches: 0", "workloads[0].launches: expected an integer >= 1"},
		{"with max_trials", "launches: 3", "launches: 3\n    max_trials: 4", "workloads[0].launches: launches 3 and max_trials exclude each other"},
		{"too few launches", "launches: 3", "launches: 2", "workload \"decode\" has launches: 2, and with launches as the unit the smallest p-value of the rank test is 0.167, above its level 0.05; raise launches (>= 3)"},
		{"empty command", "command: [/opt/pr/bin/refengine]", "command: []", "configs[1].command: expected a non-empty list (the program and its arguments); leave command out for engine.command"},
		{"empty model", "model: fixtures/models/other.json", `model: ""`, "configs[1].model: must not be empty"},
		{"misspelt", "model: fixtures/models/other.json", "modle: x", `configs[1]: unknown key "modle" (did you mean "model"?)`},
	} {
		src := strings.Replace(abSpec, tc.from, tc.to, 1)
		_, err := Parse([]byte(src), "ab.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v\nwant it to contain %q", tc.name, err, tc.want)
		}
	}
}
