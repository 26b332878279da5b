package collective

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/wire"
)

const torchFixture = "../../ci/probes/testdata/torch_allreduce_probe_h200x2.json"

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := RunProbeCLI(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestProbeJSONFollowsContract: the JSON the CLI prints decodes strictly into wire.AllReduceProbe,
// validates, and carries every case asked for with all three algorithms and their pairs.
func TestProbeJSONFollowsContract(t *testing.T) {
	code, out, errs := runCLI(t, "--tp", "4", "--sizes", "1KiB,4096", "--dtype", "float32,bfloat16",
		"--inputs", "random,integer", "--repeats", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, errs)
	}
	p, err := DecodeProbe(strings.NewReader(out))
	if err != nil {
		t.Fatalf("probe output does not follow the contract: %v\n%s", err, out)
	}
	if p.Schema != wire.AllReduceProbeSchema || p.Source != ProbeSource || p.WorldSize != 4 || p.Reference != "ring" {
		t.Fatalf("header = %+v", p)
	}
	if len(p.Results) != 8 {
		t.Fatalf("%d cases, want 2 sizes x 2 dtypes x 2 inputs = 8", len(p.Results))
	}
	for _, c := range p.Results {
		if len(c.Algorithms) != 3 || c.Algorithms[0].Name != "ring" || c.Algorithms[1].Name != "one_shot" || c.Algorithms[2].Name != "tree" {
			t.Fatalf("case %d %s %s: algorithms %+v", c.SizeBytes, c.DType, c.Inputs, c.Algorithms)
		}
		if len(c.Pairs) != 3 || c.Pairs[0].A != "one_shot" || c.Pairs[0].B != "ring" || c.Pairs[1].A != "tree" || c.Pairs[1].B != "ring" ||
			c.Pairs[2].A != "tree" || c.Pairs[2].B != "one_shot" {
			t.Fatalf("pairs %+v", c.Pairs)
		}
		for _, a := range c.Algorithms {
			if a.MedianUs == nil || a.RanksIdentical == nil || !*a.RanksIdentical {
				t.Fatalf("%s: median or ranks_identical missing/false: %+v", a.Name, a)
			}
			if c.Inputs == "integer" && (!a.Exact || a.MaxAbsErr != 0) {
				t.Fatalf("%s on integer %s inputs not exact: %+v", a.Name, c.DType, a)
			}
		}
		for _, pr := range c.Pairs {
			if c.Inputs == "random" && c.DType == "float32" && pr.Identical {
				t.Errorf("%d B float32 random on 4 ranks: %s and %s identical, orders should differ", c.SizeBytes, pr.A, pr.B)
			}
		}
		if c.Inputs == "random" && c.DType == "float32" {
			// float32 sums of 4 standard normals: a few ulps of the sum at most.
			if a := c.Algorithms[0]; a.MaxRelErr > 1e-5 || a.MaxAbsErr == 0 {
				t.Errorf("ring float32 errors implausible: %+v", a)
			}
		}
	}
}

// TestProbeTwoRanksAreIdentical: with two ranks there is only one sum (a+b == b+a), so ring and
// one-shot must agree bit for bit, as NCCL and the symmetric-memory ops did on 2 H200s.
func TestProbeTwoRanksAreIdentical(t *testing.T) {
	p, err := Probe(context.Background(), ProbeOptions{WorldSize: 2, Sizes: []int64{4096}, DTypes: []string{"float32", "bfloat16"}, Inputs: []string{"random"}, Seed: 3, Repeats: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Results {
		if len(c.Pairs) != 3 {
			t.Fatalf("%s: %d pairs, want 3 (one_shot, tree and ring)", c.DType, len(c.Pairs))
		}
		for _, pr := range c.Pairs {
			if !pr.Identical {
				t.Errorf("%s: %s and %s differ on 2 ranks: %+v", c.DType, pr.A, pr.B, pr)
			}
		}
	}
}

func TestProbeTextTable(t *testing.T) {
	code, out, errs := runCLI(t, "--tp", "2", "--sizes", "1KiB", "--repeats", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"world_size=2", "max_abs_err", "ring", "one_shot vs ring", "tree vs ring", "tree vs one_shot", "1KiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestProbeOutFileIsWrittenAtomically(t *testing.T) {
	path := filepath.Join(t.TempDir(), "probe.json")
	if code, _, errs := runCLI(t, "--tp", "2", "--sizes", "64", "--repeats", "1", "--out", path); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := ReadProbe(path); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestProbeBadFlagsExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tp", "1", "--sizes", "1KiB"}, "at least 2"},
		{[]string{"--tp", "2"}, "--sizes is required"},
		{[]string{"--tp", "2", "--sizes", "1XB"}, "unknown unit"},
		{[]string{"--tp", "2", "--sizes", "1KiB,,2KiB"}, "empty entry"},
		{[]string{"--tp", "2", "--sizes", "-5"}, "--sizes"},
		{[]string{"--tp", "2", "--sizes", "6", "--dtype", "float32"}, "multiple of 4"},
		{[]string{"--tp", "2", "--sizes", "1KiB", "--dtype", "fp8"}, "expected float32 or bfloat16"},
		{[]string{"--tp", "2", "--sizes", "1KiB", "--inputs", "ones"}, "expected random or integer"},
		{[]string{"--tp", "8", "--sizes", "1GiB"}, "limit"},
		{[]string{"--tp", "2", "--sizes", "1KiB", "extra"}, "unexpected argument"},
		{[]string{"--tp", "two"}, "invalid value"},
		{[]string{"--check", "/nonexistent/probe.json"}, "reading allreduce probe"},
	} {
		code, _, errs := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 mentioning %q", tc.args, code, errs, tc.want)
		}
	}
}

func TestParseSizes(t *testing.T) {
	got, err := ParseSizes("1KiB, 64KiB,1MiB,4096,2KB,1.5KiB")
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{1024, 65536, 1 << 20, 4096, 2000, 1536}
	if len(got) != len(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
	if _, err := ParseSizes("0.5B"); err == nil {
		t.Error("half a byte accepted")
	}
}

// TestCheckTorchFixture reads the real 2x H200 probe output through the same reading side the
// gate uses: it follows the contract and every algorithm is exact on integer inputs.
func TestCheckTorchFixture(t *testing.T) {
	code, out, errs := runCLI(t, "--check", torchFixture)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "symm_mem_one_shot") || !strings.Contains(out, "contract holds") {
		t.Fatalf("unexpected report:\n%s", out)
	}
	p, err := ReadProbe(torchFixture)
	if err != nil {
		t.Fatal(err)
	}
	if p.Source != "torch.distributed" || p.Reference != "nccl" || p.WorldSize != 2 {
		t.Fatalf("fixture header %+v", p)
	}
}

// TestCheckCatchesViolations: a probe where the candidate is not exact on integers, or where ranks
// disagree, exits 1 and names the case.
func TestCheckCatchesViolations(t *testing.T) {
	p, err := ReadProbe(torchFixture)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Results {
		c := &p.Results[i]
		if c.Inputs == "integer" && c.SizeBytes == 4096 && c.DType == "bfloat16" {
			c.Algorithms[1].Exact = false
			c.Algorithms[1].MaxAbsErr = 1
		}
		if c.Inputs == "random" && c.SizeBytes == 1024 && c.DType == "float32" {
			f := false
			c.Algorithms[2].RanksIdentical = &f
		}
	}
	path := filepath.Join(t.TempDir(), "bad.json")
	data, _ := json.Marshal(p)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "--check", path)
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, errs)
	}
	for _, want := range []string{"4KiB bfloat16 integer symm_mem_one_shot: not exact", "1KiB float32 random symm_mem_two_shot: ranks hold different results"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}

func TestValidateProbeRejectsMalformed(t *testing.T) {
	good := func() *wire.AllReduceProbe {
		p, err := Probe(context.Background(), ProbeOptions{WorldSize: 2, Sizes: []int64{64}, DTypes: []string{"float32"}, Inputs: []string{"integer"}, Seed: 1, Repeats: 1})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := ValidateProbe(good()); err != nil {
		t.Fatalf("good probe rejected: %v", err)
	}
	for _, tc := range []struct {
		name   string
		break_ func(p *wire.AllReduceProbe)
		want   string
	}{
		{"schema", func(p *wire.AllReduceProbe) { p.Schema = "reckon.allreduce-probe/v0" }, "schema"},
		{"source", func(p *wire.AllReduceProbe) { p.Source = "" }, "source"},
		{"world", func(p *wire.AllReduceProbe) { p.WorldSize = 1 }, "world_size"},
		{"reference missing", func(p *wire.AllReduceProbe) { p.Reference = "nccl" }, `reference algorithm "nccl"`},
		{"no results", func(p *wire.AllReduceProbe) { p.Results = nil }, "results: empty"},
		{"dtype", func(p *wire.AllReduceProbe) { p.Results[0].DType = "fp8" }, "results[0].dtype"},
		{"size", func(p *wire.AllReduceProbe) { p.Results[0].Elements = 3 }, "do not match"},
		{"inputs", func(p *wire.AllReduceProbe) { p.Results[0].Inputs = "ones" }, "results[0].inputs"},
		{"negative err", func(p *wire.AllReduceProbe) { p.Results[0].Algorithms[0].MaxRelErr = -1 }, "algorithms[0].max_rel_err"},
		{"duplicate alg", func(p *wire.AllReduceProbe) { p.Results[0].Algorithms[1].Name = "ring" }, "appears twice"},
		{"pair names", func(p *wire.AllReduceProbe) { p.Results[0].Pairs[0].A = "nccl" }, "pairs[0]"},
		{"identical but differs", func(p *wire.AllReduceProbe) { p.Results[0].Pairs[0].MaxAbsDiff = 1 }, "identical is true"},
		{"inexact with zero error", func(p *wire.AllReduceProbe) { p.Results[0].Algorithms[0].Exact = false }, "exact is false"},
	} {
		p := good()
		tc.break_(p)
		if err := ValidateProbe(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestDecodeProbeStrict(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"schema": "reckon.allreduce-probe/v1", "world_size": "two"}`, `field "world_size"`},
		{`{"schema": "reckon.allreduce-probe/v1", "wrold_size": 2}`, "unknown field"},
		{`{"schema": `, "decoding"},
		{`not json`, "not valid JSON"},
	} {
		if _, err := DecodeProbe(strings.NewReader(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want error mentioning %q", tc.doc, err, tc.want)
		}
	}
}

// errorBound is the largest relative error (relErr) a correct n-rank sum can have: every one of
// the n-1 additions rounds with unit roundoff u (2^-24 float32, 2^-8 bfloat16: 24 and 8
// significant bits), so |err| <= gamma_{n-1} * sum|addends| with gamma_k = k*u / (1 - k*u).
func errorBound(n int, dtype string) float64 {
	u := math.Ldexp(1, -24)
	if dtype == "bfloat16" {
		u = math.Ldexp(1, -8)
	}
	k := float64(n - 1)
	return k * u / (1 - k*u)
}

// TestProbeErrorsWithinRoundingBound: all algorithms stay within the rounding bound for every
// world size and dtype, so a gate tolerance of gamma_{n-1} can never fail a correct allreduce.
func TestProbeErrorsWithinRoundingBound(t *testing.T) {
	for _, n := range []int{2, 3, 4, 8} {
		p, err := Probe(context.Background(), ProbeOptions{WorldSize: n, Sizes: []int64{64 << 10}, DTypes: []string{"float32", "bfloat16"}, Inputs: []string{"random"}, Seed: 11, Repeats: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Results {
			for _, a := range c.Algorithms {
				if b := errorBound(n, c.DType); a.MaxRelErr > b {
					t.Errorf("tp%d %s %s: max_rel_err %.3g above the rounding bound %.3g", n, c.DType, a.Name, a.MaxRelErr, b)
				}
			}
		}
	}
}

// TestScoreCatchesWrongSums: a sum off by a few units in the last place is caught by the bound, a
// wrong element breaks exactness, and rank-order agreement is measured on every rank.
func TestScoreCatchesWrongSums(t *testing.T) {
	n, l := 8, 4096
	in := makeInputs(1, n, l, "float32", "random")
	ref, mag := make([]float64, l), make([]float64, l)
	for r := range in {
		for i, v := range in[r] {
			ref[i] += float64(v)
			mag[i] += math.Abs(float64(v))
		}
	}
	refDT := make([]float32, l)
	for i := range ref {
		refDT[i] = float32(ref[i])
	}
	good := clone(in)
	AllReduce(Ring, good)
	if _, rel, _ := score(good, ref, mag, refDT); rel > errorBound(n, "float32") {
		t.Fatalf("correct ring above the bound: %g", rel)
	}
	bad := clone(good)
	for r := range bad {
		bad[r][17] = float32(float64(bad[r][17]) + 64*errorBound(n, "float32")*mag[17]) // a wrong term
	}
	if _, rel, _ := score(bad, ref, mag, refDT); rel <= errorBound(n, "float32") {
		t.Fatalf("an element off by 64x the bound was not caught: rel %g", rel)
	}
	ints := makeInputs(1, n, l, "bfloat16", "integer")
	iref, imag := make([]float64, l), make([]float64, l)
	for r := range ints {
		for i, v := range ints[r] {
			iref[i] += float64(v)
			imag[i] += math.Abs(float64(v))
		}
	}
	irefDT := make([]float32, l)
	for i := range iref {
		irefDT[i] = BF16FromFloat64(iref[i])
	}
	out := clone(ints)
	AllReduceBF16(OneShot, out)
	if abs, _, exact := score(out, iref, imag, irefDT); !exact || abs != 0 {
		t.Fatalf("one-shot bf16 on integers not exact: abs %g", abs)
	}
	out[3][100] += 1 // one rank, one element: a stale peer buffer
	if _, _, exact := score(out, iref, imag, irefDT); exact {
		t.Fatal("a wrong element on one rank still scored exact")
	}
}

// TestAllFixturesFollowContract: every probe file kept in ci/probes/testdata (GPU and reference
// engine) reads strictly and holds the contract.
func TestAllFixturesFollowContract(t *testing.T) {
	files, err := filepath.Glob("../../ci/probes/testdata/*.json")
	if err != nil || len(files) < 4 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	for _, f := range files {
		p, err := ReadProbe(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if v := ContractViolations(p); len(v) > 0 {
			t.Errorf("%s: %v", f, v)
		}
	}
}
