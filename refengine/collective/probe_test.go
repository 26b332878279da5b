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

// probeRoster is the probe's algorithms in output order.
var probeRoster = []string{"ring", "tree", "ring_rotated", "one_shot", "one_shot+scale", "one_shot+drop_peer", "one_shot+stale"}

// TestProbeJSONFollowsContract: the JSON the CLI prints decodes strictly into wire.AllReduceProbe
// (v2), validates, and carries every case asked for with the whole roster, its roles, and a pair
// of every algorithm with the reference.
func TestProbeJSONFollowsContract(t *testing.T) {
	code, out, errs := runCLI(t, "--tp", "4", "--sizes", "1KiB,4096", "--dtype", "float32,bfloat16",
		"--inputs", "random,integer", "--repeats", "1", "--min-samples", "0", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, errs)
	}
	p, err := DecodeProbe(strings.NewReader(out))
	if err != nil {
		t.Fatalf("probe output does not follow the contract: %v\n%s", err, out)
	}
	if p.Schema != wire.AllReduceProbeSchema || p.Source != ProbeSource || p.WorldSize != 4 || p.Reference != "ring" || p.Calibration == nil {
		t.Fatalf("header = %+v", p)
	}
	wantRoles := []string{wire.RoleReference, wire.RoleTwin, wire.RoleTwin, wire.RoleCandidate, wire.RolePositiveControl, wire.RolePositiveControl, wire.RolePositiveControl}
	for i, r := range p.Calibration.Roles {
		if r.Algorithm != probeRoster[i] || r.Role != wantRoles[i] {
			t.Errorf("roles[%d] = %+v, want %s %s", i, r, probeRoster[i], wantRoles[i])
		}
	}
	if len(p.Results) != 8 {
		t.Fatalf("%d cases, want 2 sizes x 2 dtypes x 2 inputs = 8", len(p.Results))
	}
	for _, c := range p.Results {
		if c.Mode != "eager" || c.Calls != DefaultProbeCalls || c.CallsPerSync != 1 {
			t.Errorf("pattern %s x%d/%d", c.Mode, c.Calls, c.CallsPerSync)
		}
		if len(c.Algorithms) != len(probeRoster) || len(c.Pairs) != len(probeRoster)-1 {
			t.Fatalf("case %d %s %s: %d algorithms, %d pairs", c.SizeBytes, c.DType, c.Inputs, len(c.Algorithms), len(c.Pairs))
		}
		for i, a := range c.Algorithms {
			if a.Name != probeRoster[i] || a.MedianUs == nil || a.RanksIdentical == nil || !*a.RanksIdentical || a.NRMSE == nil || a.MaxULP == nil {
				t.Fatalf("%s: %+v", a.Name, a)
			}
			if i > 0 && (c.Pairs[i-1].A != a.Name || c.Pairs[i-1].B != "ring") {
				t.Fatalf("pairs[%d] = %+v", i-1, c.Pairs[i-1])
			}
			control := strings.Contains(a.Name, "+")
			if c.Inputs == "integer" && !control && (!a.Exact || a.MaxAbsErr != 0 || *a.NRMSE != 0) {
				t.Fatalf("%s on integer %s inputs not exact: %+v", a.Name, c.DType, a)
			}
			if a.Name == "one_shot" && (*a.NRMSE != 0 || *a.MaxULP != 0 || *a.EngagedCalls != c.Calls) {
				t.Errorf("one_shot is the oracle's order (rank order, float32, one rounding) and engaged in every call: %+v", a)
			}
		}
		if c.Inputs == "random" && c.DType == "float32" {
			// float32 sums of 4 standard normals: a few ulps of the sum at most.
			if a := c.Algorithms[0]; a.MaxRelErr > 1e-5 || a.MaxAbsErr == 0 || *a.NRMSE == 0 {
				t.Errorf("ring float32 errors implausible: %+v", a)
			}
			if c.Pairs[0].Identical || c.Pairs[1].Identical {
				t.Errorf("%d B float32 random on 4 ranks: tree or ring_rotated identical to ring, orders should differ", c.SizeBytes)
			}
		}
	}
}

// TestProbeTwoRanksAreIdentical: with two ranks there is only one sum (a+b == b+a), so ring, tree
// and one-shot must agree bit for bit and equal the oracle, as NCCL and the symmetric-memory ops
// did on 2 H200s.
func TestProbeTwoRanksAreIdentical(t *testing.T) {
	p, err := Probe(context.Background(), ProbeOptions{WorldSize: 2, Sizes: []int64{4096}, DTypes: []string{"float32", "bfloat16"}, Inputs: []string{"random", "wide"}, Seed: 3, Repeats: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Results {
		for i, pr := range c.Pairs[:3] {
			if !pr.Identical || *c.Algorithms[i+1].MaxULP != 0 {
				t.Errorf("%s %s: %s and %s differ on 2 ranks: %+v", c.DType, c.Inputs, pr.A, pr.B, pr)
			}
		}
		if *c.Algorithms[0].NRMSE != 0 {
			t.Errorf("%s: ring differs from the oracle on 2 ranks", c.DType)
		}
	}
}

// TestProbeControlsAndFaults: each positive control's fault is active where it should be (scale
// always, drop_peer above its size, stale from the second call on), a fault injected into the
// candidate itself shows in its metrics, and the custom path is not taken above its limit.
func TestProbeControlsAndFaults(t *testing.T) {
	o := ProbeOptions{WorldSize: 4, Sizes: []int64{1024, 8192}, DTypes: []string{"bfloat16"}, Inputs: []string{"random"}, Seed: 5, Repeats: 1, Calls: 3, MinSamples: 1, DropAbove: 4096, CustomMaxBytes: 4096}
	p, err := Probe(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	small, big := p.Results[0], p.Results[1]
	get := func(c wire.AllReduceProbeCase, name string) wire.AllReduceProbeAlgorithm {
		for _, a := range c.Algorithms {
			if a.Name == name {
				return a
			}
		}
		t.Fatalf("no %s", name)
		return wire.AllReduceProbeAlgorithm{}
	}
	if a := get(small, "one_shot+scale"); *a.FaultedCalls != 3 || *a.NRMSE < 0.005 {
		t.Errorf("scale: %+v", a)
	}
	if a := get(small, "one_shot+stale"); *a.FaultedCalls != 2 || *a.NRMSE < 0.5 {
		t.Errorf("stale: faulted %d nrmse %g, want 2 of 3 calls and a whole-value error", *a.FaultedCalls, *a.NRMSE)
	}
	if a := get(small, "one_shot+drop_peer"); *a.FaultedCalls != 0 || *a.NRMSE != 0 {
		t.Errorf("drop_peer below its size: %+v", a)
	}
	// 8 KiB is above the custom limit: the candidate and its controls hand it to the ring.
	for _, n := range []string{"one_shot", "one_shot+drop_peer"} {
		if a := get(big, n); *a.EngagedCalls != 0 || *a.NRMSE != *get(big, "ring").NRMSE {
			t.Errorf("%s above max_bytes: %+v", n, a)
		}
	}
	o.CustomMaxBytes = 0
	for _, tc := range []struct {
		fault string
		check func(a wire.AllReduceProbeAlgorithm) bool
	}{
		{"scale", func(a wire.AllReduceProbeAlgorithm) bool { return *a.NRMSE > 0.005 && *a.EngagedCalls == 3 }},
		{"drop_peer", func(a wire.AllReduceProbeAlgorithm) bool { return *a.NRMSE > 0.1 }},
		{"stale", func(a wire.AllReduceProbeAlgorithm) bool { return *a.NRMSE > 0.5 }},
		{"fallback", func(a wire.AllReduceProbeAlgorithm) bool { return *a.EngagedCalls == 0 }},
	} {
		o.CandidateFault = tc.fault
		p, err := Probe(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if a := get(p.Results[1], "one_shot"); !tc.check(a) {
			t.Errorf("candidate fault %s not visible: %+v", tc.fault, a)
		}
	}
	// A per-rank order: in bf16 the float32 accumulator makes it exact (ranks agree); in float32
	// the ranks disagree in the last bits, which the probe records.
	o.CandidateFault = "rank_order"
	for _, dt := range []string{"bfloat16", "float32"} {
		o.DTypes = []string{dt}
		p, err := Probe(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		a := get(p.Results[0], "one_shot")
		if a.RanksIdentical == nil || *a.RanksIdentical != (dt == "bfloat16") {
			t.Errorf("rank_order %s: ranks identical %v", dt, a.RanksIdentical)
		}
	}
	o.DTypes = []string{"bfloat16"}
	o.NoControls, o.CandidateFault = true, ""
	if p, err := Probe(context.Background(), o); err != nil || len(p.Calibration.Roles) != 4 || len(p.Results[0].Algorithms) != 4 {
		t.Errorf("--no-controls: %v %+v", err, p.Calibration)
	}
}

// TestProbeInputs: the input kinds are what their names say, and every call gets a fresh
// payload.
func TestProbeInputs(t *testing.T) {
	n, l := 4, 4096
	a, b := makeInputsCall(1, n, l, "bfloat16", "random", 0), makeInputsCall(1, n, l, "bfloat16", "random", 1)
	if a[0][0] == b[0][0] && a[0][1] == b[0][1] && a[1][0] == b[1][0] {
		t.Error("two calls got the same payload")
	}
	w := makeInputsCall(1, n, l, "bfloat16", "wide", 0)
	lo, hi := math.Inf(1), 0.0
	for _, v := range w[0] {
		if m := math.Abs(float64(v)); m > 0 {
			lo, hi = min(lo, m), max(hi, m)
		}
	}
	if hi/lo < 1<<30 {
		t.Errorf("wide inputs span %g..%g, want about 2^40", lo, hi)
	}
	o := makeInputsCall(1, n, l, "float32", "order_sensitive", 2)
	for i := 0; i < l; i++ {
		var s float64
		nz := 0
		for r := 0; r < n; r++ {
			s += float64(o[r][i])
			if o[r][i] != 0 {
				nz++
			}
		}
		if nz != 3 || math.Abs(s) != 1 {
			t.Fatalf("column %d: %d non-zero, sum %g; want 2^24, 1, -2^24", i, nz, s)
		}
	}
}

func TestProbeTextTable(t *testing.T) {
	code, out, errs := runCLI(t, "--tp", "2", "--sizes", "1KiB", "--repeats", "1", "--min-samples", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"world_size=2", "max_abs_err", "nrmse", "max_ulp", "engaged", "ring", "one_shot vs ring", "tree vs ring", "one_shot+stale vs ring", "1KiB"} {
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
		{[]string{"--tp", "2", "--sizes", "1KiB", "--inputs", "ones"}, "expected random, wide, order_sensitive or integer"},
		{[]string{"--tp", "2", "--sizes", "1KiB", "--calls", "1"}, "--calls 1"},
		{[]string{"--tp", "2", "--sizes", "1KiB", "--candidate-fault", "melt"}, "--candidate-fault"},
		{[]string{"--tp", "2", "--sizes", "1KiB", "--custom-max-bytes", "big"}, "--custom-max-bytes"},
		{[]string{"--tp", "2", "--sizes", "1KiB", "--scale-fault", "0"}, "--scale-fault"},
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
				if strings.Contains(a.Name, "+") {
					continue // a positive control: broken on purpose
				}
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
