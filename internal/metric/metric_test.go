package metric

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLookupNamed(t *testing.T) {
	for _, c := range []struct {
		name    string
		dir     Direction
		unit    string
		sources Source
	}{
		{"kv_cache_tokens", HigherIsBetter, "tok", EngineReport},
		{"peak_gpu_mem_gib", NoDirection, "GiB", GPUSampler},
		{"output_throughput", HigherIsBetter, "tok/s", Workload | Imported},
		{"request_throughput", HigherIsBetter, "req/s", Workload | Imported},
		{"median_tpot_ms", LowerIsBetter, "ms", Workload | Imported},
		{"p99_e2el_ms", LowerIsBetter, "ms", Workload | Imported},
		{"spec_accept_length", HigherIsBetter, "tok", EngineReport | Workload | Imported},
		{"weights_gib", NoDirection, "GiB", EngineReport},
		{"input_throughput", HigherIsBetter, "tok/s", Imported},
		// Imported families, known by shape.
		{"p75_tpot_ms", LowerIsBetter, "ms", Imported},
		{"p99.9_itl_ms", LowerIsBetter, "ms", Imported},
		{"p99_ttft_s", LowerIsBetter, "s", Imported},
		{"total_throughput", HigherIsBetter, "", Imported},
		{"avg_ttft_ms", LowerIsBetter, "ms", Imported},
	} {
		m, ok := Lookup(c.name)
		if !ok || m.Name != c.name || m.Direction != c.dir || m.Unit != c.unit || m.Sources != c.sources {
			t.Errorf("Lookup(%q) = %+v, %v; want direction %q, unit %q, sources %s", c.name, m, ok, c.dir, c.unit, c.sources)
		}
	}
	for _, name := range []string{"", "ttft", "p99_e2e_ms", "mean_e2e_ms", "goodput", "model_id", "p99_ttft_ms_x"} {
		if m, ok := Lookup(name); ok {
			t.Errorf("Lookup(%q) = %+v, want unknown", name, m)
		}
	}
}

// TestWorkloadLatencies: the latency metrics reckon's workload emits are exactly
// {mean,median,std,p90,p95,p99}_{ttft,tpot,itl,e2el}_ms (workload pins its Result against the
// registry in its own test).
func TestWorkloadLatencies(t *testing.T) {
	var got []string
	for _, m := range Produced(Workload) {
		if m.Unit == "ms" {
			got = append(got, m.Name)
		}
	}
	var want []string
	for _, q := range []string{"ttft", "tpot", "itl", "e2el"} {
		for _, s := range []string{"mean", "median", "std", "p90", "p95", "p99"} {
			want = append(want, s+"_"+q+"_ms")
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("workload latency metrics = %v\nwant %v", got, want)
	}
}

func TestProduced(t *testing.T) {
	got := Names(Produced(EngineReport | GPUSampler))
	want := []string{"weights_gib", "kv_cache_tokens", "kv_cache_gib", "available_gpu_mem_gib", "cuda_graph_seconds", "cuda_graph_gib",
		"max_running_requests", "context_len", "max_concurrency", "spec_accept_length", "peak_gpu_mem_gib"}
	if !slices.Equal(got, want) {
		t.Errorf("engine and sampler metrics = %v\nwant %v", got, want)
	}
	for _, m := range Produced(Imported) {
		if !m.Sources.Has(Imported) {
			t.Errorf("Produced(Imported) holds %s from %s", m.Name, m.Sources)
		}
	}
	if n := len(Produced(Workload)); n != 16+24 {
		t.Errorf("workload metrics: %d, want 40 (16 counts, rates and settings, 24 latency statistics)", n)
	}
	for _, m := range All() {
		if m.Sources == 0 || m.Doc == "" {
			t.Errorf("%s: no source or no doc", m.Name)
		}
		if m.Direction != HigherIsBetter && m.Direction != LowerIsBetter && m.Direction != NoDirection {
			t.Errorf("%s: direction %q", m.Name, m.Direction)
		}
	}
	if s := (EngineReport | Workload).String(); s != "engine report, workload" {
		t.Errorf("Source.String = %q", s)
	}
}

const (
	docBegin = "<!-- metric registry: generated from internal/metric by TestDocTable; do not edit (RECKON_UPDATE_DOCS=1 go test ./internal/metric) -->"
	docEnd   = "<!-- end of metric registry -->"
)

// docTable renders the registry as docs/metrics.md's table.
func docTable() string {
	var b strings.Builder
	b.WriteString("| metric | better | unit | source | what |\n|---|---|---|---|---|\n")
	better := map[Direction]string{HigherIsBetter: "higher", LowerIsBetter: "lower", NoDirection: "–"}
	unit := func(u string) string {
		if u == "" {
			return "–"
		}
		return u
	}
	for _, m := range All() {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", m.Name, better[m.Direction], unit(m.Unit), m.Sources, m.Doc)
	}
	for _, p := range Patterns() {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", p.Shape, better[p.Direction], unit(p.Unit), Imported, p.Doc)
	}
	return b.String()
}

// TestDocTable fails when docs/metrics.md's registry table differs from the registry.
func TestDocTable(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "metrics.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: no %q ... %q section", path, docBegin, docEnd)
	}
	want := doc[:i] + docBegin + "\n" + docTable() + doc[j:]
	if want == doc {
		return
	}
	if os.Getenv("RECKON_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the metric registry table is stale: regenerate with RECKON_UPDATE_DOCS=1 go test ./internal/metric", path)
}
