package spec

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// specFixtures is the folder of spec files users run or copy; bad/ under it holds the specs that
// must fail (TestBadSpecs) and is left out here.
const specFixtures = "../fixtures/specs"

// goodSpecFiles returns every .yaml/.yml file under fixtures/specs, at any depth, except those
// under fixtures/specs/bad.
func goodSpecFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(specFixtures, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel, _ := filepath.Rel(specFixtures, path); rel == "bad" {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext == ".yaml" || ext == ".yml" {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", specFixtures, err)
	}
	return files
}

// TestExamplesLoad loads every spec under fixtures/specs (examples/ included, bad/ excluded):
// a spec that users run or copy must never fail to load.
func TestExamplesLoad(t *testing.T) {
	files := goodSpecFiles(t)
	var examples int
	for _, f := range files {
		if strings.Contains(filepath.ToSlash(f), "/examples/") {
			examples++
		}
	}
	if examples < 3 {
		t.Fatalf("found %d specs under fixtures/specs/examples, want at least 3 (%v)", examples, files)
	}
	for _, f := range files {
		t.Run(strings.TrimPrefix(filepath.ToSlash(f), specFixtures+"/"), func(t *testing.T) {
			s, err := Load(f)
			if err != nil {
				t.Fatalf("%s does not load:\n%v", f, err)
			}
			if s.File != f {
				t.Errorf("File = %q, want %q", s.File, f)
			}
			// Every config must resolve: these are the launches a gate run would make.
			for _, name := range s.ConfigNames() {
				if _, err := s.Resolved(name); err != nil {
					t.Errorf("config %s does not resolve: %v", name, err)
				}
			}
		})
	}
}

// TestExamplesAreGPUReady pins what makes the GPU examples worth copying: a real engine (no
// reference-engine command), a hub model id, the allreduce comparison, and premerge/nightly labels
// that select something.
func TestExamplesAreGPUReady(t *testing.T) {
	cases := []struct {
		file   string
		kind   string
		tp     int
		labels []string // labels that must select at least one check
		eagle3 []string // configs that must run EAGLE-3 with a draft model
	}{
		{"sglang-8gpu-nvlink.yaml", EngineSGLang, 8, []string{"premerge", "nightly"}, []string{"eagle3"}},
		{"sglang-8gpu-pcie.yaml", EngineSGLang, 8, []string{"premerge", "nightly"}, []string{"nccl", "custom-ar"}},
		{"vllm-4gpu.yaml", EngineVLLM, 4, []string{"premerge", "nightly"}, []string{"eagle3"}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			s, err := Load(filepath.Join(specFixtures, "examples", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if s.Engine.Kind != tc.kind || s.Engine.TPSize != tc.tp {
				t.Errorf("engine = %s tp %d, want %s tp %d", s.Engine.Kind, s.Engine.TPSize, tc.kind, tc.tp)
			}
			if len(s.Engine.Command) != 0 {
				t.Errorf("command = %v, want the adapter's default (a real engine)", s.Engine.Command)
			}
			if owner, _, ok := strings.Cut(s.Engine.Model, "/"); !ok || owner == "" || strings.HasPrefix(s.Engine.Model, ".") || strings.HasPrefix(s.Engine.Model, "fixtures/") {
				t.Errorf("model = %q, want a hub id such as meta-llama/Llama-3.1-8B-Instruct", s.Engine.Model)
			}
			nccl, err := s.Resolved("nccl")
			if err != nil || !nccl.DisableCustomAllReduce {
				t.Errorf("config nccl must disable custom allreduce (err %v)", err)
			}
			car, err := s.Resolved("custom-ar")
			if err != nil || car.DisableCustomAllReduce {
				t.Errorf("config custom-ar must allow custom allreduce (err %v)", err)
			}
			for _, name := range tc.eagle3 {
				l, err := s.Resolved(name)
				if err != nil || l.Speculative == nil || l.Speculative.Algorithm != "EAGLE3" || l.Speculative.DraftModel == "" {
					t.Errorf("config %s: speculative = %+v (err %v), want EAGLE3 with a draft model", name, l.Speculative, err)
				}
				if tc.kind == EngineVLLM && l.Speculative != nil && l.Speculative.EagleTopK > 1 {
					t.Errorf("config %s: eagle_topk %d; vLLM drafts a chain (topk 1)", name, l.Speculative.EagleTopK)
				}
			}
			var vsNCCL, kvGuard bool
			for _, c := range s.Checks {
				if p := c.Stat(); p != nil && p.Config == "custom-ar" && p.Against == AgainstConfig && p.AgainstConfig == "nccl" && p.Metric == "output_throughput" {
					vsNCCL = true
				}
				if p := c.Relative(); p != nil && p.Config == "custom-ar" && p.Of == "nccl" && p.Metric == "kv_cache_tokens" && p.MinRatio != nil && *p.MinRatio >= 0.9 {
					kvGuard = true
				}
			}
			if !vsNCCL {
				t.Error("no throughput check of custom-ar against config:nccl")
			}
			if !kvGuard {
				t.Error("no relative check keeping custom-ar's kv_cache_tokens >= 0.9x nccl's")
			}
			for _, l := range tc.labels {
				if n := checksLabelled(s, l); n == 0 {
					t.Errorf("label %q selects no check", l)
				}
			}
		})
	}
}

// checksLabelled counts the checks that carry label l, the way the suites label them: every
// check has the spec's tags, its own tags and the names of the configs it involves; floors and
// expects run inside their config's container and so also carry that config's tags. Relative,
// equivalence and statistical checks run in the cross-config container, without config tags.
func checksLabelled(s *Spec, l string) int {
	n := 0
	for _, c := range s.Checks {
		labels := append(append([]string(nil), s.Tags...), c.Tags...)
		labels = append(labels, c.ConfigNames()...)
		if c.Kind == KindFloor || c.Kind == KindExpect {
			for _, name := range c.ConfigNames() {
				labels = append(labels, s.Labels(name)...)
			}
		}
		for _, x := range labels {
			if x == l {
				n++
				break
			}
		}
	}
	return n
}

// TestGoodSpecFilesSkipsBad makes sure the walk above really leaves bad/ out and finds nested
// folders, so that a new example folder is covered without editing this test.
func TestGoodSpecFilesSkipsBad(t *testing.T) {
	if _, err := os.Stat(filepath.Join(specFixtures, "bad")); err != nil {
		t.Skip("no fixtures/specs/bad")
	}
	for _, f := range goodSpecFiles(t) {
		if strings.Contains(filepath.ToSlash(f), "/bad/") {
			t.Errorf("%s is under bad/", f)
		}
	}
	// A bad spec must fail Load: the walk's exclusion is what keeps TestExamplesLoad green.
	bad, _ := filepath.Glob(filepath.Join(specFixtures, "bad", "*.yaml"))
	for _, f := range bad {
		if _, err := Load(f); err == nil {
			t.Errorf("%s loads without error; it belongs outside bad/", f)
		}
	}
}
