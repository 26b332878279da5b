package enginefacts

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/conformance.md's facts section")

const docPath = "../../docs/conformance.md"

// TestDoc pins docs/conformance.md's facts section to the table (-update rewrites it).
func TestDoc(t *testing.T) {
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Splice(string(b))
	if err != nil {
		t.Fatalf("%s: %v", docPath, err)
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != string(b) {
		t.Errorf("%s: the facts section differs from wire/enginefacts; run go test ./wire/enginefacts -run TestDoc -update", docPath)
	}
}

// TestTable checks every fact is well formed: a unique ID, a known engine, parseable releases in
// order, values, and sources with every field.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range All() {
		if f.ID == "" || seen[f.ID] {
			t.Errorf("fact %q: empty or duplicate ID", f.ID)
		}
		seen[f.ID] = true
		switch f.Engine {
		case SGLang, VLLM, FlashInfer, NCCL:
		default:
			t.Errorf("%s: engine %q", f.ID, f.Engine)
		}
		s, sok := f.SinceTriple()
		u, uok := f.UntilTriple()
		if (f.Since != "" && !sok) || (f.Until != "" && !uok) || (sok && uok && !less(s, u)) {
			t.Errorf("%s: release range %q..%q", f.ID, f.Since, f.Until)
		}
		if f.Says == "" || len(f.Values) == 0 {
			t.Errorf("%s: says nothing or names no value", f.ID)
		}
		for _, src := range f.Sources {
			if src.Repo == "" || src.Path == "" || src.Ref == "" || src.Quote == "" {
				t.Errorf("%s: source %+v lacks a field", f.ID, src)
			}
		}
		if got, ok := Lookup(f.ID); !ok || got.ID != f.ID {
			t.Errorf("Lookup(%q) = %v, %v", f.ID, got, ok)
		}
	}
	facts, sources, unverified := Counts()
	if facts != len(all) || sources == 0 || unverified >= facts {
		t.Errorf("counts %d %d %d", facts, sources, unverified)
	}
	md := Markdown()
	if !strings.Contains(md, "**unverified**") || !strings.Contains(md, "`vllm.profiler.config_flag`") {
		t.Errorf("Markdown lacks an unverified mark or a fact:\n%s", md)
	}
}

func TestInRange(t *testing.T) {
	cases := []struct {
		f      Fact
		v      [3]int
		newest bool
		want   bool
	}{
		{VLLMMaxCaptureSize, [3]int{0, 11, 0}, false, false},
		{VLLMMaxCaptureSize, [3]int{0, 11, 1}, false, true},
		{VLLMMaxCaptureSize, [3]int{0, 0, 0}, true, true},
		{VLLMProfilerEnv, [3]int{0, 15, 1}, false, true},
		{VLLMProfilerEnv, [3]int{0, 16, 0}, false, false},
		{VLLMProfilerEnv, [3]int{0, 0, 0}, true, false},
		{VLLMProfilerConfig, [3]int{0, 12, 0}, false, false},
		{VLLMProfilerConfig, [3]int{0, 13, 0}, false, true},
	}
	for _, c := range cases {
		if got := c.f.InRange(c.v, c.newest); got != c.want {
			t.Errorf("%s.InRange(%v, newest %v) = %v, want %v", c.f.ID, c.v, c.newest, got, c.want)
		}
	}
}
