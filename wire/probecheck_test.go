package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const torchProbeFile = "../ci/probes/testdata/torch_allreduce_probe_h200x2.json"

func readTestFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// probeErr decodes doc and returns its *ProbeError, failing the test when doc decodes.
func probeErr(t *testing.T, doc string) *ProbeError {
	t.Helper()
	p, err := DecodeAllReduceProbe(strings.NewReader(doc))
	if err == nil {
		t.Fatalf("decoded %+v, want an error for:\n%.300s", p, doc)
	}
	var pe *ProbeError
	if !errors.As(err, &pe) {
		t.Fatalf("error %T %v, want a *ProbeError", err, err)
	}
	return pe
}

// wantProblem asserts that one of pe's problems is at line:col (0: any) and mentions every want.
func wantProblem(t *testing.T, pe *ProbeError, line, col int, want ...string) {
	t.Helper()
	for _, p := range pe.Problems {
		if line != 0 && (p.Line != line || p.Column != col) {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(p.String(), w)
		}
		if ok {
			return
		}
	}
	t.Errorf("no problem at %d:%d mentioning %q in:\n%v", line, col, want, pe)
}

// minimal is a small valid probe (2 ranks, one case, the reference and one candidate).
const minimal = `{
  "schema": "reckon.allreduce-probe/v1",
  "source": "torch.distributed",
  "world_size": 2,
  "reference": "nccl",
  "results": [
    {
      "size_bytes": 1024,
      "elements": 512,
      "dtype": "bfloat16",
      "inputs": "random",
      "algorithms": [
        {"name": "nccl", "max_abs_err": 0.0078125, "max_rel_err": 0.0039, "exact": true, "median_us": 12.5, "ranks_identical": true},
        {"name": "one_shot", "max_abs_err": 0.0078125, "max_rel_err": 0.0039, "exact": true}
      ],
      "pairs": [
        {"a": "one_shot", "b": "nccl", "max_abs_diff": 0, "max_rel_diff": 0, "identical": true}
      ]
    }
  ]
}
`

// edit replaces the first old in minimal by new, failing when old is absent.
func edit(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(minimal, old) {
		t.Fatalf("minimal lacks %q", old)
	}
	return strings.Replace(minimal, old, new, 1)
}

func TestDecodeAllReduceProbeFixtures(t *testing.T) {
	files, err := filepath.Glob("../ci/probes/testdata/*.json")
	if err != nil || len(files) < 4 {
		t.Fatalf("fixtures %v: %v", files, err)
	}
	for _, f := range files {
		p, err := ReadAllReduceProbe(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		// Strict decoding loses nothing: it equals the lenient decode, and survives a round trip.
		var lenient AllReduceProbe
		if err := json.Unmarshal(readTestFile(t, f), &lenient); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*p, lenient) {
			t.Errorf("%s: strict and lenient decodes differ", f)
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if q, err := DecodeAllReduceProbe(bytes.NewReader(again)); err != nil || !reflect.DeepEqual(p, q) {
			t.Errorf("%s: round trip: %v", f, err)
		}
	}
	p, err := ReadAllReduceProbe(torchProbeFile)
	if err != nil {
		t.Fatal(err)
	}
	if p.WorldSize != 2 || p.Reference != "nccl" || len(p.Results) != 68 || len(p.Results[0].Algorithms) != 3 || len(p.Results[0].Pairs) != 3 {
		t.Errorf("torch fixture: world %d, reference %q, %d cases", p.WorldSize, p.Reference, len(p.Results))
	}
	if _, err := DecodeAllReduceProbe(strings.NewReader(minimal)); err != nil {
		t.Fatalf("minimal probe rejected: %v", err)
	}
}

func TestDecodeAllReduceProbeCorruptJSON(t *testing.T) {
	good := string(readTestFile(t, torchProbeFile))
	pe := probeErr(t, good[:len(good)/3])
	wantProblem(t, pe, 0, 0, "unexpected end of input", "truncated")
	if !pe.Decoding || len(pe.Problems) != 1 {
		t.Errorf("truncated: %d problems, decoding=%v: %v", len(pe.Problems), pe.Decoding, pe)
	}
	// A missing comma: the position is that of the offending character.
	pe = probeErr(t, edit(t, `"world_size": 2,`, `"world_size": 2`))
	wantProblem(t, pe, 5, 3, "not valid JSON", `invalid character '"'`)
	pe = probeErr(t, "this is the log, not the probe")
	wantProblem(t, pe, 1, 2, "not valid JSON")
	pe = probeErr(t, " \n\t")
	wantProblem(t, pe, 0, 0, "empty input")
	pe = probeErr(t, minimal+`{"schema": "reckon.allreduce-probe/v1"}`)
	wantProblem(t, pe, 22, 1, "trailing data")
	pe = probeErr(t, `[`+minimal+`]`)
	wantProblem(t, pe, 1, 1, "the document: got an array, expected an object")
	// A UTF-8 byte order mark (some editors add one) is not a problem.
	if _, err := DecodeAllReduceProbe(strings.NewReader("\xef\xbb\xbf" + minimal)); err != nil {
		t.Errorf("BOM: %v", err)
	}
}

func TestDecodeAllReduceProbeSchema(t *testing.T) {
	// Another reckon document: the schema is named first, then what does not fit.
	pe := probeErr(t, `{"schema": "reckon.numerics/v1", "config": "nccl", "top_k": 5, "prompts": []}`)
	if !strings.Contains(pe.Problems[0].Msg, `"reckon.numerics/v1", expected "reckon.allreduce-probe/v2" (or the older "reckon.allreduce-probe/v1")`) {
		t.Errorf("first problem %q, want the schema", pe.Problems[0].Msg)
	}
	wantProblem(t, pe, 1, 34, `unknown field "config"`)
	// A well-formed document of an unknown version fails validation, located at its schema.
	pe = probeErr(t, edit(t, `allreduce-probe/v1"`, `allreduce-probe/v3"`))
	if pe.Decoding {
		t.Errorf("a valid document of another version should fail validation, not decoding: %v", pe)
	}
	wantProblem(t, pe, 2, 13, `schema: "reckon.allreduce-probe/v3", expected "reckon.allreduce-probe/v2" (or the older "reckon.allreduce-probe/v1")`)
	// A v1 document relabelled v2 lacks everything that makes it calibrated; each is named.
	pe = probeErr(t, edit(t, `allreduce-probe/v1"`, `allreduce-probe/v2"`))
	for _, w := range []string{"calibration: missing", "results[0].mode", "results[0].algorithms[0].nrmse: missing", "results[0].algorithms[0].max_ulp: missing"} {
		wantProblem(t, pe, 0, 0, w)
	}
	pe = probeErr(t, edit(t, `"schema": "reckon.allreduce-probe/v1",`, ``))
	wantProblem(t, pe, 1, 1, `the document: missing required field "schema" (a string)`)
}

func TestDecodeAllReduceProbeFields(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		line, col int
		want      []string
	}{
		{"unknown field", edit(t, `"exact": true, "median_us"`, `"exact": true, "exactness": 1, "median_us"`), 13, 90,
			[]string{`unknown field "exactness" in results[0].algorithms[0]`, "expected one of engaged_calls, exact, faulted_calls, max_abs_err"}},
		{"misspelt field", edit(t, `"max_rel_err": 0.0039, "exact": true}`, `"max_rel_error": 0.0039, "exact": true}`), 14, 56,
			[]string{`unknown field "max_rel_error" in results[0].algorithms[1] (did you mean "max_rel_err"?)`}},
		// encoding/json would take World_Size for world_size; the contract's names are exact.
		{"field name case", edit(t, `"world_size"`, `"World_Size"`), 4, 3, []string{`unknown field "World_Size"`, `did you mean "world_size"?`}},
		{"duplicate field", edit(t, `"world_size": 2,`, `"world_size": 2, "world_size": 8,`), 4, 20,
			[]string{`field "world_size": appears twice`}},
		{"missing metric", edit(t, `"max_abs_err": 0.0078125, "max_rel_err": 0.0039, "exact": true}`, `"max_abs_err": 0.0078125, "exact": true}`), 14, 9,
			[]string{`results[0].algorithms[1]: missing required field "max_rel_err" (a number)`}},
		{"missing results", minimal[:strings.Index(minimal, `,
  "results"`)] + "\n}", 1, 1,
			[]string{`the document: missing required field "results" (an array)`}},
		{"wrong type", edit(t, `"world_size": 2`, `"world_size": "2"`), 4, 17, []string{`field "world_size": got string "2", expected an integer`}},
		{"fraction for integer", edit(t, `"elements": 512`, `"elements": 512.5`), 9, 19, []string{`field "results[0].elements": 512.5, expected an integer`}},
		{"null number", edit(t, `"max_rel_err": 0.0039`, `"max_rel_err": null`), 13, 67, []string{`field "results[0].algorithms[0].max_rel_err": null, expected a number`}},
		{"object for string", edit(t, `"dtype": "bfloat16"`, `"dtype": {"name": "bfloat16", "bits": [16, {"e": 8}]}`), 10, 16,
			[]string{`field "results[0].dtype": got an object, expected a string`}},
		{"array for string", edit(t, `"inputs": "random"`, `"inputs": ["random"]`), 11, 17, []string{`field "results[0].inputs": got an array, expected a string`}},
		{"string for bool", edit(t, `"identical": true`, `"identical": "true"`), 17, 91, []string{`field "results[0].pairs[0].identical": got string "true", expected true or false`}},
		{"out of range", edit(t, `"max_abs_err": 0.0078125`, `"max_abs_err": 1e999`), 13, 41, []string{"1e999 is out of range"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pe := probeErr(t, tc.doc)
			if !pe.Decoding {
				t.Errorf("want a decoding error: %v", pe)
			}
			wantProblem(t, pe, tc.line, tc.col, tc.want...)
		})
	}
}

// TestDecodeAllReduceProbeAllProblems: the walk goes on past a mistyped value (skipping it
// whole), so one run reports every problem of the file, in document order.
func TestDecodeAllReduceProbeAllProblems(t *testing.T) {
	doc := edit(t, `"dtype": "bfloat16"`, `"dtype": {"name": "bfloat16", "bits": [16, {"e": 8}]}`)
	doc = strings.Replace(doc, `"max_rel_err": 0.0039, "exact": true}`, `"max_rel_err": "0.0039", "exact": 1}`, 1)
	doc = strings.Replace(doc, `"identical": true`, `"identical": true, "note": "x"`, 1)
	pe := probeErr(t, doc)
	var got []string
	for _, p := range pe.Problems {
		got = append(got, p.Path)
	}
	want := []string{"results[0].dtype", "results[0].algorithms[1].max_rel_err", "results[0].algorithms[1].exact", "results[0].pairs[0].note"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems at %q, want %q:\n%v", got, want, pe)
	}
}

// TestDecodeAllReduceProbeNonFinite: Python's json writes NaN and ±Infinity unless told not to;
// the error says where and why rather than "invalid character 'N'".
func TestDecodeAllReduceProbeNonFinite(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		col  int
		path string
	}{
		{"NaN", 67, "results[0].algorithms[0].max_rel_err"},
		{"Infinity", 67, "results[0].algorithms[0].max_rel_err"},
		{"-Infinity", 67, "results[0].algorithms[0].max_rel_err"},
	} {
		pe := probeErr(t, edit(t, `"max_rel_err": 0.0039`, `"max_rel_err": `+tc.lit))
		wantProblem(t, pe, 13, tc.col, "in "+tc.path, tc.lit+" is not a JSON number", "allow_nan=False")
	}
	pe := probeErr(t, edit(t, `"median_us": 12.5`, `"median_us": NaN`))
	wantProblem(t, pe, 13, 103, "in results[0].algorithms[0].median_us", "NaN is not a JSON number")
	// Negative errors are valid JSON but break the contract.
	pe = probeErr(t, edit(t, `"max_rel_diff": 0`, `"max_rel_diff": -1e-9`))
	wantProblem(t, pe, 17, 75, "results[0].pairs[0].max_rel_diff: -1e-09, expected a finite non-negative number")
}

func TestDecodeAllReduceProbeMissingResults(t *testing.T) {
	idx := strings.Index(minimal, `"results"`)
	for _, v := range []string{"[]", "null"} {
		pe := probeErr(t, minimal[:idx]+`"results": `+v+"\n}\n")
		wantProblem(t, pe, 6, 14, "results: empty, expected at least one (size, dtype, inputs) case")
	}
}

// TestDecodeAllReduceProbeOptional: what the contract leaves optional decodes: device, median_us,
// ranks_identical, a case without pairs, and the metrics of a skipped algorithm.
func TestDecodeAllReduceProbeOptional(t *testing.T) {
	doc := edit(t, `{"name": "one_shot", "max_abs_err": 0.0078125, "max_rel_err": 0.0039, "exact": true}`,
		`{"name": "one_shot", "skipped": "torch.ops.symm_mem.one_shot_all_reduce is missing"}`)
	doc = doc[:strings.Index(doc, `,
      "pairs"`)] + doc[strings.Index(doc, "\n    }\n  ]"):]
	p, err := DecodeAllReduceProbe(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	if a := p.Results[0].Algorithms[1]; a.Skipped == "" || a.MedianUs != nil || len(p.Results[0].Pairs) != 0 {
		t.Errorf("decoded %+v", p.Results[0])
	}
	// Without "skipped", the same entry lacks its metrics.
	pe := probeErr(t, strings.Replace(doc, `"skipped": "torch.ops.symm_mem.one_shot_all_reduce is missing"`, `"median_us": 3`, 1))
	for _, f := range []string{"max_abs_err", "max_rel_err", "exact"} {
		wantProblem(t, pe, 14, 9, `missing required field "`+f+`"`)
	}
}

func TestValidateAllReduceProbe(t *testing.T) {
	good := func() *AllReduceProbe {
		p, err := DecodeAllReduceProbe(strings.NewReader(minimal))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	alg := func(p *AllReduceProbe, j int) *AllReduceProbeAlgorithm { return &p.Results[0].Algorithms[j] }
	pair := func(p *AllReduceProbe) *AllReduceProbePair { return &p.Results[0].Pairs[0] }
	for _, tc := range []struct {
		name   string
		break_ func(p *AllReduceProbe)
		want   string
	}{
		{"schema", func(p *AllReduceProbe) { p.Schema = "reckon.allreduce-probe/v0" }, `schema: "reckon.allreduce-probe/v0", expected`},
		{"source", func(p *AllReduceProbe) { p.Source = " " }, "source: missing"},
		{"world size", func(p *AllReduceProbe) { p.WorldSize = 1 }, "world_size: 1, expected the number of ranks, at least 2"},
		{"reference", func(p *AllReduceProbe) { p.Reference = "" }, "reference: missing"},
		{"reference absent", func(p *AllReduceProbe) { p.Reference = "ring" }, `results[0].algorithms: the reference algorithm "ring" is not among`},
		{"no results", func(p *AllReduceProbe) { p.Results = nil }, "results: empty"},
		{"dtype", func(p *AllReduceProbe) { p.Results[0].DType = "fp8" }, `results[0].dtype: "fp8", expected float32, bfloat16 or float16`},
		{"size", func(p *AllReduceProbe) { p.Results[0].DType = "float32" }, "results[0]: size_bytes 1024 and elements 512 do not match float32"},
		{"zero size", func(p *AllReduceProbe) { p.Results[0].SizeBytes, p.Results[0].Elements = 0, 0 }, "do not match"},
		{"inputs", func(p *AllReduceProbe) { p.Results[0].Inputs = "ones" }, `results[0].inputs: "ones", expected random or integer`},
		{"no algorithms", func(p *AllReduceProbe) { p.Results[0].Algorithms, p.Results[0].Pairs = nil, nil }, "results[0].algorithms: empty"},
		{"unnamed", func(p *AllReduceProbe) { alg(p, 1).Name = "" }, "results[0].algorithms[1].name: missing"},
		{"duplicate name", func(p *AllReduceProbe) { alg(p, 1).Name = "nccl" }, `algorithms[1].name: "nccl" appears twice`},
		{"negative error", func(p *AllReduceProbe) { alg(p, 0).MaxAbsErr = -1 }, "algorithms[0].max_abs_err: -1, expected a finite non-negative number"},
		{"NaN error", func(p *AllReduceProbe) { alg(p, 1).MaxRelErr = nan() }, "algorithms[1].max_rel_err: NaN"},
		{"infinite time", func(p *AllReduceProbe) { inf := 1 / zero(); alg(p, 0).MedianUs = &inf }, "algorithms[0].median_us: +Inf"},
		{"inexact with no error", func(p *AllReduceProbe) { alg(p, 0).Exact, alg(p, 0).MaxAbsErr = false, 0 }, "exact is false but max_abs_err is 0"},
		{"pair unknown", func(p *AllReduceProbe) { pair(p).A = "ring" }, `results[0].pairs[0]: a="ring" b="nccl", expected two different algorithms`},
		{"pair self", func(p *AllReduceProbe) { pair(p).A = "nccl" }, "expected two different algorithms"},
		{"pair skipped", func(p *AllReduceProbe) { alg(p, 1).Skipped = "op missing" }, "compares an algorithm that was skipped"},
		{"pair twice", func(p *AllReduceProbe) {
			p.Results[0].Pairs = append(p.Results[0].Pairs, AllReduceProbePair{A: "nccl", B: "one_shot", Identical: true})
		}, "results[0].pairs[1]: nccl and one_shot were already compared in pairs[0]"},
		{"identical but differs", func(p *AllReduceProbe) { pair(p).MaxAbsDiff = 1 }, "identical is true but max_abs_diff is 1"},
	} {
		p := good()
		tc.break_(p)
		err := p.Validate()
		var pe *ProbeError
		if !errors.As(err, &pe) || pe.Decoding || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a validation error mentioning %q", tc.name, err, tc.want)
		}
	}
	// A skipped algorithm's metrics are not judged.
	p := good()
	p.Results[0].Pairs = nil
	*alg(p, 1) = AllReduceProbeAlgorithm{Name: "one_shot", MaxRelErr: -1, Skipped: "size refused"}
	if err := p.Validate(); err != nil {
		t.Errorf("skipped algorithm judged: %v", err)
	}
	var nilProbe *AllReduceProbe
	if err := nilProbe.Validate(); err == nil {
		t.Error("nil probe validated")
	}
}

func nan() float64  { z := zero(); return z / z }
func zero() float64 { return 0 }

// TestReadAllReduceProbeErrors: every error names the file; validation problems found in a file
// carry the line of the offending value; a problem repeated in every case is listed once.
func TestReadAllReduceProbeErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadAllReduceProbe(filepath.Join(dir, "absent.json"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "absent.json") {
		t.Errorf("missing file: %v", err)
	}
	path := filepath.Join(dir, "probe.json")
	if err := os.WriteFile(path, []byte(edit(t, `"inputs": "random"`, `"inputs": "gaussian"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadAllReduceProbe(path)
	var pe *ProbeError
	if !errors.As(err, &pe) || pe.File != path || len(pe.Problems) != 1 {
		t.Fatalf("got %v", err)
	}
	want := path + `: allreduce probe does not follow reckon.allreduce-probe/v1 (docs/allreduce-probe.md): line 11 col 17: results[0].inputs: "gaussian", expected random or integer`
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
	// The same misspelling in all 68 cases of a real file: one line, with the count.
	bad := strings.ReplaceAll(string(readTestFile(t, torchProbeFile)), `"median_us"`, `"median_ns"`)
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadAllReduceProbe(path)
	if !errors.As(err, &pe) || len(pe.Problems) != 204 {
		t.Fatalf("got %v", err)
	}
	msg := err.Error()
	if n := strings.Count(msg, "\n"); n != 1 || !strings.Contains(msg, `line 19 col 11: unknown field "median_ns" in results[0].algorithms[0]`) ||
		!strings.Contains(msg, "(and the same in 203 more places)") || !strings.HasPrefix(msg, path+": decoding allreduce probe: 204 problems:") {
		t.Errorf("%d lines:\n%s", strings.Count(msg, "\n")+1, msg)
	}
}

func BenchmarkDecodeAllReduceProbe(b *testing.B) {
	data := readTestFile(b, torchProbeFile)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := DecodeAllReduceProbe(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// calibratedFile is a calibrated (v2) probe written by refengine (ci/probes/testdata).
const calibratedFile = "../ci/probes/testdata/refengine_probe_tp4.json"

// TestValidateCalibratedProbe: a v2 probe needs its calibration, a call pattern per case, the
// oracle metrics of every algorithm and the counters of candidates and controls; a v1 probe may
// carry none of them. Each problem names its JSON path.
func TestValidateCalibratedProbe(t *testing.T) {
	good := func() *AllReduceProbe {
		p, err := ReadAllReduceProbe(calibratedFile)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := good()
	if p.Schema != AllReduceProbeSchema || p.Calibration == nil || len(p.Calibration.Roles) != 7 {
		t.Fatalf("fixture header %+v", p.Calibration)
	}
	ptr := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name   string
		break_ func(p *AllReduceProbe)
		want   string
	}{
		{"no calibration", func(p *AllReduceProbe) { p.Calibration = nil }, "calibration: missing"},
		{"no oracle", func(p *AllReduceProbe) { p.Calibration.Oracle = "" }, "calibration.oracle: missing"},
		{"unknown role", func(p *AllReduceProbe) { p.Calibration.Roles[1].Role = "sibling" }, `calibration.roles[1].role: "sibling", expected reference, twin, candidate or positive_control`},
		{"duplicate role", func(p *AllReduceProbe) { p.Calibration.Roles[2].Algorithm = "tree" }, `"tree" is listed twice`},
		{"reference not reference", func(p *AllReduceProbe) { p.Calibration.Roles[0].Role = RoleTwin }, `the reference "ring" has no role reference`},
		{"control of nothing", func(p *AllReduceProbe) { p.Calibration.Roles[4].Of = "ring" }, `calibration.roles[4].of: "ring", expected the candidate`},
		{"control without fault", func(p *AllReduceProbe) { p.Calibration.Roles[4].Fault = "" }, "calibration.roles[4].fault: missing"},
		{"algorithm without role", func(p *AllReduceProbe) { p.Results[0].Algorithms[1].Name = "tree2" }, `results[0].algorithms[1].name: "tree2" has no role`},
		{"mode", func(p *AllReduceProbe) { p.Results[0].Mode = "graph" }, `results[0].mode: "graph", expected eager, queued or cuda_graph`},
		{"calls", func(p *AllReduceProbe) { p.Results[0].CallsPerSync = 3 }, "results[0]: calls 64, calls_per_sync 3"},
		{"inputs", func(p *AllReduceProbe) { p.Results[0].Inputs = "ones" }, `results[0].inputs: "ones", expected random, wide, order_sensitive or integer`},
		{"nrmse missing", func(p *AllReduceProbe) { p.Results[0].Algorithms[1].NRMSE = nil }, "results[0].algorithms[1].nrmse: missing"},
		{"nrmse negative", func(p *AllReduceProbe) { v := -1.0; p.Results[0].Algorithms[1].NRMSE = &v }, "results[0].algorithms[1].nrmse: -1"},
		{"engagement missing", func(p *AllReduceProbe) { p.Results[0].Algorithms[3].EngagedCalls = nil }, "results[0].algorithms[3].engaged_calls: missing on a candidate"},
		{"engagement too many", func(p *AllReduceProbe) { p.Results[0].Algorithms[3].EngagedCalls = ptr(65) }, "engaged_calls: 65, expected between 0 and the case's 64 calls"},
		{"faulted missing", func(p *AllReduceProbe) { p.Results[0].Algorithms[4].FaultedCalls = nil }, "results[0].algorithms[4].faulted_calls: missing on a positive_control"},
		{"v1 with calibration", func(p *AllReduceProbe) { p.Schema = AllReduceProbeSchemaV1 }, "calibration: present in a reckon.allreduce-probe/v1 document"},
	} {
		p := good()
		tc.break_(p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error mentioning %q", tc.name, err, tc.want)
		}
	}
	// Validation problems of a file carry the line of the offending value.
	data := strings.Replace(string(readTestFile(t, calibratedFile)), `"mode": "eager"`, `"mode": "lazy"`, 1)
	_, err := DecodeAllReduceProbe(strings.NewReader(data))
	var pe *ProbeError
	if !errors.As(err, &pe) || len(pe.Problems) != 1 || pe.Problems[0].Line == 0 || !strings.Contains(err.Error(), "does not follow reckon.allreduce-probe/v2") {
		t.Errorf("got %v", err)
	}
}
