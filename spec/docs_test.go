package spec

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocsExamples keeps docs/spec.md honest: its full example must load, and every check
// snippet must load inside a spec that has the configs, workload and numerics it names.
func TestDocsExamples(t *testing.T) {
	b, err := os.ReadFile("../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) < 8 {
		t.Fatalf("found %d yaml blocks in docs/spec.md", len(blocks))
	}
	if _, err := Parse([]byte(blocks[0][1]), "docs/spec.md#example"); err != nil {
		t.Errorf("the full example does not load:\n%v", err)
	}
	const base = `name: docs
engine: {kind: sglang, model: m, tp_size: 2}
configs: [{name: nccl}, {name: nccl-tree, env: {NCCL_ALGO: Tree}}, {name: custom-ar}]
workloads: [{name: decode, concurrency: 1, num_prompts: 1, input_len: 1, output_len: 1, trials: 5}]
numerics: {prompts: p.jsonl}
checks:
`
	snippets := 0
	for _, blk := range blocks[1:] {
		src := blk[1]
		if !strings.HasPrefix(src, "- kind:") {
			continue
		}
		snippets++
		var indented strings.Builder
		for _, l := range strings.Split(strings.TrimRight(src, "\n"), "\n") {
			indented.WriteString("  " + l + "\n")
		}
		s, err := Parse([]byte(base+indented.String()), "docs/spec.md#snippet")
		if err != nil {
			t.Errorf("snippet does not load:\n%s\n%v", src, err)
			continue
		}
		// The name the docs print after "Name:" is the generated one.
		t.Logf("%s", s.Checks[0].Name)
	}
	if snippets != 7 {
		t.Errorf("found %d check snippets, want 7", snippets)
	}
}
