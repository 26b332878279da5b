package suites_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// TestMeasurementFieldsEndToEnd runs fixtures/specs/measurement.yaml twice: first without a
// baseline (the relative-to-baseline KV check says no_baseline), then, after recording the
// first run as the baseline, with it (the check passes). Each new workload and check field is
// judged from what the run measured and wrote.
func TestMeasurementFieldsEndToEnd(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	if testing.Short() {
		t.Skip("integration")
	}
	first := gateSpec(t, "measurement.yaml")
	if first.exit != 0 {
		t.Fatalf("first run: exit %d, want 0 (green without --strict)\n%s", first.exit, first.dump())
	}
	rel := first.check(t, "relative nccl kv_cache_tokens >= 0.95 x baseline")
	if rel.Outcome != "no_baseline" {
		t.Errorf("relative to baseline without one: %+v", rel)
	}

	// Goodput SLOs and floors on result metrics: medians over the trials, judged per config.
	for _, name := range []string{"floor request_goodput >= 0.5 (slo)", "floor p99_ttft_ms <= 60000 (slo)", "floor output_throughput >= 10 (slo)"} {
		for _, c := range first.results.Checks {
			if c.Name == name && c.Status != gate.StatusPassed {
				t.Errorf("%s: %+v", name, c)
			}
		}
	}
	if c := first.check(t, "floor request_goodput >= 0.5 (slo)"); !strings.Contains(c.Message, "median of 3 trials of slo") {
		t.Errorf("goodput floor message %q", c.Message)
	}

	// A metric absent from every trial (no speculative decoding, no accept length) is skipped.
	if c := first.check(t, "throughput custom-ar slo spec_accept_length vs nccl"); c.Status != gate.StatusSkipped || !strings.Contains(c.Message, "have no spec_accept_length (not measured; absent, never taken as 0)") {
		t.Errorf("absent metric: %+v", c)
	}

	// Trials for every config the chat workload names, though no statistical check names them.
	trials := map[string]int{}
	for _, cfg := range first.results.Configs {
		for _, tr := range cfg.Trials {
			if tr.Workload == "chat-sharegpt" {
				trials[cfg.Name]++
			}
		}
	}
	if trials["nccl"] != 2 || trials["custom-ar"] != 2 {
		t.Errorf("chat-sharegpt trials per config %v, want 2 each", trials)
	}

	// The chat workload's trial file: chat endpoint, sampling settings, ShareGPT's own output
	// lengths (no ignore_eos: at most the dataset's), and the cycled dataset's warning.
	var tr struct {
		Metadata struct {
			Workload struct {
				Endpoint        string   `json:"endpoint"`
				Temperature     float64  `json:"temperature"`
				TopP            *float64 `json:"top_p"`
				IgnoreEOS       bool     `json:"ignore_eos"`
				OutputLenSource string   `json:"output_len_source"`
			} `json:"workload"`
		} `json:"metadata"`
		Completed int      `json:"completed"`
		Warnings  []string `json:"warnings"`
		Details   struct {
			InputLens  []int `json:"input_lens"`
			OutputLens []int `json:"output_lens"`
		} `json:"details"`
	}
	b, err := os.ReadFile(filepath.Join(first.out, "trials", "nccl+chat-sharegpt+1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	w := tr.Metadata.Workload
	if w.Endpoint != "/v1/chat/completions" || w.Temperature != 0.8 || w.TopP == nil || *w.TopP != 0.9 || w.IgnoreEOS || w.OutputLenSource != "dataset" || tr.Completed != 8 {
		t.Errorf("chat trial workload %+v, completed %d", w, tr.Completed)
	}
	// sharegpt-mini's replies ask for ceil(len/4) tokens each: 38, 12, 47, 1 and 34.
	for i, n := range tr.Details.OutputLens {
		if n < 1 || n > 47 {
			t.Errorf("request %d generated %d tokens; the dataset asks for at most 47", i, n)
		}
		if tr.Details.InputLens[i] <= 0 {
			t.Errorf("request %d: no real input length", i)
		}
	}
	if !strings.Contains(strings.Join(tr.Warnings, "\n"), "is cycled") {
		t.Errorf("warnings %q: the 5-prompt dataset for 8 requests must be reported as cycled", tr.Warnings)
	}
	if m := first.check(t, "nccl: throughput trials (chat-sharegpt)"); !strings.Contains(m.Message, "is cycled") {
		t.Errorf("the measurement does not show the cycled-dataset warning: %q", m.Message)
	}

	// Record the first run as the baseline; the chat workload's trials of both configs are in it.
	base := t.TempDir()
	rec := exec.Command(filepath.Join(repoRoot, "bin", "reckon"), "baseline", "record", "--from", filepath.Join(first.out, "results.json"), "--dir", base)
	rec.Dir = repoRoot
	if out, err := rec.CombinedOutput(); err != nil {
		t.Fatalf("baseline record: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(base, "*", "measurement.json"))
	if len(files) != 1 {
		t.Fatalf("baseline files %v", files)
	}
	bb, _ := os.ReadFile(files[0])
	var bl struct {
		Configs []struct {
			Name      string `json:"name"`
			Workloads []struct {
				Name string `json:"name"`
			} `json:"workloads"`
		} `json:"configs"`
	}
	if err := json.Unmarshal(bb, &bl); err != nil {
		t.Fatal(err)
	}
	inBaseline := map[string]bool{}
	for _, c := range bl.Configs {
		for _, w := range c.Workloads {
			inBaseline[c.Name+"/"+w.Name] = true
		}
	}
	if !inBaseline["nccl/chat-sharegpt"] || !inBaseline["custom-ar/chat-sharegpt"] {
		t.Errorf("baseline holds %v; want the chat-sharegpt trials of both configs", inBaseline)
	}

	second := gateSpec(t, "measurement.yaml", "--baselines", base)
	if second.exit != 0 {
		t.Fatalf("second run: exit %d\n%s", second.exit, second.dump())
	}
	if c := second.check(t, "relative nccl kv_cache_tokens >= 0.95 x baseline"); c.Status != gate.StatusPassed || !strings.Contains(c.Message, "baseline") {
		t.Errorf("relative to the recorded baseline: %+v", c)
	}
}
