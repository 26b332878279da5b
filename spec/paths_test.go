package spec

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLoadResolvesDataPathsAgainstTheSpecFile: numerics.prompts, workload datasets and probe
// files are read relative to the spec file whatever the working directory is (a spec from a
// trusted checkout never reads a same-named file of the pull request's tree); absolute paths,
// commands and models stay as written; Parse (no file) changes nothing.
func TestLoadResolvesDataPathsAgainstTheSpecFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "trusted", ".reckon")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(t.TempDir(), "probe.json")
	src := `name: paths
engine: {kind: sglang, command: [venvs/main/bin/python, -m, sglang.launch_server], model: org/model, tp_size: 2}
configs: [{name: nccl, disable_custom_all_reduce: true}, {name: custom-ar}]
workloads:
  - {name: chat, concurrency: 4, num_prompts: 8, dataset: data/chat.jsonl, output_len: 16}
numerics: {prompts: numerics.jsonl}
checks:
  - {kind: equivalence, base: nccl, head: custom-ar}
  - {kind: allreduce_probe, file: ` + abs + `}
`
	p := filepath.Join(dir, "premerge.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Numerics.Prompts, filepath.Join(dir, "numerics.jsonl"); got != want {
		t.Errorf("numerics.prompts = %q, want %q", got, want)
	}
	if got, want := s.Workloads[0].Dataset, filepath.Join(dir, "data", "chat.jsonl"); got != want {
		t.Errorf("dataset = %q, want %q", got, want)
	}
	var probe *AllReduceProbeParams
	for _, c := range s.Checks {
		if p := c.Probe(); p != nil {
			probe = p
		}
	}
	if probe == nil || probe.File != abs {
		t.Errorf("probe file = %+v, want %q kept (absolute)", probe, abs)
	}
	if s.Engine.Command[0] != "venvs/main/bin/python" || s.Engine.Model != "org/model" {
		t.Errorf("command %q and model %q must stay as written", s.Engine.Command[0], s.Engine.Model)
	}
	// The bad case: the same file through Parse keeps the path as written (relative to the
	// working directory); Load is what makes it the spec's.
	raw, err := Parse([]byte(src), p)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Numerics.Prompts != "numerics.jsonl" {
		t.Errorf("Parse changed numerics.prompts to %q", raw.Numerics.Prompts)
	}
}
