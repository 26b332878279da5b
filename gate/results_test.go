package gate

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/reckon-ci/reckon/internal/atomicfile"
)

func TestJSONRoundTripIsLossless(t *testing.T) {
	want := sampleRun()
	path := filepath.Join(t.TempDir(), "results.json")
	if err := atomicfile.Write(path, func(w io.Writer) error { return WriteResults(w, want) }); err != nil {
		t.Fatal(err)
	}
	got, err := ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	// NaN != NaN: compare NaNs as equal; everything else must be identical.
	if d := cmp.Diff(want, got, cmpopts.EquateNaNs(), cmpopts.IgnoreUnexported(StatResult{})); d != "" {
		t.Fatalf("round trip changed the run (-want +got):\n%s", d)
	}
	if !math.IsNaN(got.Configs[3].Trials[0].Metrics["median_ttft_ms"]) {
		t.Fatalf("NaN metric did not survive: %v", got.Configs[3].Trials[0].Metrics)
	}
}

func TestJSONRoundTripDetectsLoss(t *testing.T) {
	// The comparison above must be able to fail: a changed field is a diff.
	a := sampleRun()
	b := sampleRun()
	b.Checks[3].Stat.CIHigh = 0.46
	if cmp.Diff(a, b, cmpopts.EquateNaNs(), cmpopts.IgnoreUnexported(StatResult{})) == "" {
		t.Fatal("cmp did not see a changed CI bound")
	}
}

func TestJSONWritesInfinitiesAndEmptySchema(t *testing.T) {
	r := &Run{SpecName: "x", Checks: []Check{{Verdict: Verdict{Name: "c", Stat: &StatResult{Ratio: math.Inf(1), PValue: math.Inf(-1)}}}},
		Configs: []Config{{Name: "a", GPUPeakMiB: []float64{math.NaN()}, Engine: map[string]any{"bad": math.Inf(1)}}}}
	var buf bytes.Buffer
	if err := WriteResults(&buf, r); err != nil {
		t.Fatal(err)
	}
	if r.Schema != "" {
		t.Fatal("WriteJSON modified its input")
	}
	got, err := DecodeResults(buf.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if got.Schema != ResultsSchema || got.Checks[0].Stat == nil || !math.IsNaN(got.Configs[0].GPUPeakMiB[0]) {
		t.Fatalf("non-finite values lost: %s", buf.String())
	}
	if got.Configs[0].Engine["bad"] != "+Inf" {
		t.Fatalf("engine map non-finite value: %#v", got.Configs[0].Engine["bad"])
	}
}

func TestReadResultsErrors(t *testing.T) {
	good := func() string {
		var b bytes.Buffer
		if err := WriteResults(&b, sampleRun()); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}()
	cases := []struct {
		name, content string
		want          []string
	}{
		{"empty", "  \n", []string{"empty file", ResultsSchema}},
		{"truncated", good[:len(good)/2], []string{"bad.json"}},
		{"syntax", "{\n  \"schema\": \"reckon.results/v1\",\n  \"configs\": [,]\n}", []string{"line 3, column", "invalid JSON"}},
		{"no schema", `{"spec_name": "x"}`, []string{`no "schema" field`, "not a reckon results file"}},
		{"future schema", `{"schema": "reckon.results/v9"}`, []string{`"reckon.results/v9" is not supported`, ResultsSchema, ResultsSchemaV1}},
		{"other schema", `{"schema": "reckon.numerics/v1"}`, []string{"not a reckon results file"}},
		{"wrong type", "{\"schema\": \"reckon.results/v1\",\n\"configs\": [{\"name\": \"a\", \"launches\": \"one\"}]}", []string{"line 2", "launches", "int"}},
		{"bad metric", "{\"schema\": \"reckon.results/v1\", \"checks\": [{\"name\": \"a\", \"ratio\": \"fast\"}]}", []string{"expected a number", "fast"}},
		{"trailing", "{\"schema\": \"reckon.results/v1\"}\n{}", []string{"line 2", "after top-level value"}},
		// Last-wins would read a red run with `,"configs":[]` appended as one that judged nothing.
		{"duplicate key", strings.TrimSuffix(good, "}\n") + `,"configs":[]}`, []string{`field "configs"`, `duplicate key "configs"`}},
		{"duplicate key in other case", strings.TrimSuffix(good, "}\n") + `,"Checks":[]}`, []string{`field "Checks"`, "ignoring case"}},
		{"duplicate nested key", "{\"schema\": \"reckon.results/v1\",\n\"configs\": [{\"name\": \"a\"}, {\"name\": \"b\", \"name\": \"a\"}]}", []string{"line 2", `field "configs[1].name"`, "duplicate key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadResults(path)
			if err == nil {
				t.Fatal("corrupt results accepted")
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
	if _, err := ReadResults(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("missing file accepted")
	}
}

func TestJSONRoundTripEdgeValues(t *testing.T) {
	loc := time.FixedZone("CET", 3600)
	for name, r := range map[string]*Run{
		"zero":              {},
		"empty collections": {Configs: []Config{{Name: "a", Trials: []Trial{{Metrics: map[string]float64{}}}, Engine: map[string]any{}}}, Checks: []Check{}},
		"nested engine":     {Configs: []Config{{Name: "a", Engine: map[string]any{"errors": []any{map[string]any{"kind": "oom", "line": 3.0}}, "ready": true, "reason": nil}}}},
		"zoned times":       {StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, loc), FinishedAt: time.Date(2026, 1, 2, 4, 4, 5, 0, loc)},
		"durations":         {Checks: []Check{{Verdict: Verdict{Name: "x", Outcome: Pass, Stat: &StatResult{PValue: 0}}, Duration: 1234567891 * time.Nanosecond}}},
	} {
		var b bytes.Buffer
		if err := WriteResults(&b, r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := DecodeResults(b.Bytes())
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, b.String())
		}
		want := *r
		want.Schema = ResultsSchema
		// Empty and nil collections are the same JSON; everything else must be identical.
		if d := cmp.Diff(&want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(StatResult{})); d != "" {
			t.Errorf("%s (-want +got):\n%s", name, d)
		}
	}
}

func TestReadResultsReadsSchemaV1(t *testing.T) {
	// A v1 file kept a statistical check's decision at "outcome" and a summary of its statistics
	// flat on the check; it reads into the whole-result form (Stat) with the verdict's outcome.
	v1 := `{"schema": "reckon.results/v1", "spec_name": "default", "configs": [{"name": "nccl", "launches": 1}],
  "checks": [
    {"name": "throughput nccl decode output_throughput vs baseline", "kind": "throughput", "config": "nccl", "status": "failed",
     "outcome": "regression", "message": "nccl: output_throughput -12%", "metric": "output_throughput",
     "base_median": 100, "head_median": 88, "ratio": 0.88, "ci_low": 0.85, "ci_high": "NaN", "p_value": 0.001, "duration_ns": 5},
    {"name": "p99 vs baseline", "kind": "latency", "config": "nccl", "status": "skipped", "outcome": "inconclusive", "metric": "p99_ttft_ms"},
    {"name": "kv floor", "kind": "floor", "config": "nccl", "status": "passed", "outcome": "pass", "metrics": {"kv_cache_gib": 10.4}}
  ]}`
	r, err := DecodeResults([]byte(v1))
	if err != nil {
		t.Fatal(err)
	}
	tp, lat, fl := r.Checks[0], r.Checks[1], r.Checks[2]
	if tp.Outcome != Fail || tp.Stat == nil || tp.Stat.Outcome != Regression || tp.Stat.Metric != "output_throughput" ||
		tp.Stat.BaseMedian != 100 || tp.Stat.Ratio != 0.88 || !math.IsNaN(tp.Stat.CIHigh) || tp.Stat.PValue != 0.001 || tp.Duration != 5 {
		t.Errorf("statistical v1 check: %+v stat %+v", tp, tp.Stat)
	}
	if lat.Outcome != Inconclusive || lat.Stat == nil || lat.Stat.Outcome != Undecided || (lat.Stat != nil && !math.IsNaN(lat.Stat.Ratio)) {
		t.Errorf("inconclusive v1 check: %+v stat %+v", lat, lat.Stat)
	}
	if fl.Stat != nil || fl.Outcome != Pass || fl.Metrics["kv_cache_gib"] != 10.4 {
		t.Errorf("floor v1 check: %+v", fl)
	}
	if c := r.Count(); c.Failed != 1 || c.Inconclusive != 1 || c.Passed != 1 {
		t.Errorf("counts %+v", c)
	}
	// Written again, it is a v2 file that reads back the same.
	var buf bytes.Buffer
	r.Schema = ""
	if err := WriteResults(&buf, r); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeResults(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if back.Schema != ResultsSchema || back.Checks[0].Stat == nil || back.Checks[0].Stat.Ratio != 0.88 || !math.IsNaN(back.Checks[0].Stat.CIHigh) {
		t.Errorf("v1 -> v2: %s", buf.String())
	}
}

// Reading a results.json rejects a finite value outside the range of a measurement, naming the
// field.
func TestResultsRejectAbsurdValues(t *testing.T) {
	var b bytes.Buffer
	if err := WriteResults(&b, sampleRun()); err != nil {
		t.Fatal(err)
	}
	good := b.String()
	for _, tc := range []struct{ old, new, want string }{
		{`"output_throughput": 87.71`, `"output_throughput": 1.5e308`, `.metrics.output_throughput": 1.5e+308 is outside the range`},
		{`"kv_cache_gib": 10.42`, `"kv_cache_gib": 1e300`, `field "configs[0].engine.kv_cache_gib": 1e+300 is outside the range`},
		{`30120,`, `-1.7e308,`, `field "configs[0].gpu_peak_mib[0]"`},
	} {
		if !strings.Contains(good, tc.old) {
			t.Fatalf("sample results lack %s", tc.old)
		}
		_, err := DecodeResults([]byte(strings.Replace(good, tc.old, tc.new, 1)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.new, err, tc.want)
		}
	}
	if _, err := DecodeResults([]byte(good)); err != nil {
		t.Fatalf("the untouched results: %v", err)
	}
}
