package reporters

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
)

func TestJSONRoundTripIsLossless(t *testing.T) {
	want := sampleRun()
	path := filepath.Join(t.TempDir(), "results.json")
	if err := WriteFileAtomic(path, func(w io.Writer) error { return WriteJSON(w, want) }); err != nil {
		t.Fatal(err)
	}
	got, err := ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	// NaN != NaN: compare NaNs as equal; everything else must be identical.
	if d := cmp.Diff(want, got, cmpopts.EquateNaNs()); d != "" {
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
	*b.Checks[3].CIHigh = 0.46
	if cmp.Diff(a, b, cmpopts.EquateNaNs()) == "" {
		t.Fatal("cmp did not see a changed CI bound")
	}
}

func TestJSONWritesInfinitiesAndEmptySchema(t *testing.T) {
	r := &Run{SpecName: "x", Checks: []Check{{Name: "c", Ratio: fp(math.Inf(1)), PValue: fp(math.Inf(-1))}},
		Configs: []Config{{Name: "a", GPUPeakMiB: []float64{math.NaN()}, Engine: map[string]any{"bad": math.Inf(1)}}}}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	if r.Schema != "" {
		t.Fatal("WriteJSON modified its input")
	}
	got, err := DecodeResults(buf.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if got.Schema != Schema || !math.IsInf(*got.Checks[0].Ratio, 1) || !math.IsInf(*got.Checks[0].PValue, -1) || !math.IsNaN(got.Configs[0].GPUPeakMiB[0]) {
		t.Fatalf("non-finite values lost: %s", buf.String())
	}
	if got.Configs[0].Engine["bad"] != "+Inf" {
		t.Fatalf("engine map non-finite value: %#v", got.Configs[0].Engine["bad"])
	}
}

func TestReadResultsErrors(t *testing.T) {
	good := func() string {
		var b bytes.Buffer
		if err := WriteJSON(&b, sampleRun()); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}()
	cases := []struct {
		name, content string
		want          []string
	}{
		{"empty", "  \n", []string{"empty file", Schema}},
		{"truncated", good[:len(good)/2], []string{"bad.json"}},
		{"syntax", "{\n  \"schema\": \"reckon.results/v1\",\n  \"configs\": [,]\n}", []string{"line 3, column", "invalid JSON"}},
		{"no schema", `{"spec_name": "x"}`, []string{`no "schema" field`, "not a reckon results file"}},
		{"future schema", `{"schema": "reckon.results/v2"}`, []string{`"reckon.results/v2" is not supported`, Schema}},
		{"other schema", `{"schema": "reckon.numerics/v1"}`, []string{"not a reckon results file"}},
		{"wrong type", "{\"schema\": \"reckon.results/v1\",\n\"configs\": [{\"name\": \"a\", \"launches\": \"one\"}]}", []string{"line 2", "launches", "int"}},
		{"bad metric", "{\"schema\": \"reckon.results/v1\", \"checks\": [{\"name\": \"a\", \"ratio\": \"fast\"}]}", []string{"expected a number", "fast"}},
		{"trailing", "{\"schema\": \"reckon.results/v1\"}\n{}", []string{"line 2", "after top-level value"}},
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
		"durations":         {Checks: []Check{{Name: "x", Duration: 1234567891 * time.Nanosecond, PValue: fp(0)}}},
	} {
		var b bytes.Buffer
		if err := WriteJSON(&b, r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := DecodeResults(b.Bytes())
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, b.String())
		}
		want := *r
		want.Schema = Schema
		// Empty and nil collections are the same JSON; everything else must be identical.
		if d := cmp.Diff(&want, got, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s (-want +got):\n%s", name, d)
		}
	}
}
