package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestCompareHelpListsFlags: compare's flags are in --help.
func TestCompareHelpListsFlags(t *testing.T) {
	out, _, code := execCmd(t, newCompareCmd(), "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, f := range []string{"--base", "--head", "--alpha", "--min-effect", "--gate", "--two-sided", "--json", "--strict"} {
		if !strings.Contains(out, f) {
			t.Errorf("--help does not list %s:\n%s", f, out)
		}
	}
}

// TestCompareMinEffectAsTheSpecWritesIt: 5% and 0.05 mean the same; a bare 5 is rejected with
// the spelling to use.
func TestCompareMinEffectAsTheSpecWritesIt(t *testing.T) {
	for in, want := range map[string]float64{"5%": 0.05, "0.05": 0.05, "2.5%": 0.025, "0": 0} {
		got, err := parseMinEffect(in)
		if err != nil || got < want-1e-12 || got > want+1e-12 {
			t.Errorf("--min-effect %s = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{"5": "write 5% for 5 percent", "fast": "expected a percentage", "100%": "[0%, 100%)", "-1%": "[0%, 100%)"} {
		if _, err := parseMinEffect(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--min-effect %s: %v, want an error with %q", in, err, want)
		}
	}
	// The effect really applies: a 10% regression is one at 5% and none at 0.15.
	dir := t.TempDir()
	base := writeVLLMTrials(t, mkdir(t, dir, "base"), 5, 1200, 50, 1)
	head := writeVLLMTrials(t, mkdir(t, dir, "head"), 5, 1080, 50, 2)
	for me, wantCode := range map[string]int{"5%": 1, "0.05": 1, "0.15": 0} {
		_, errs, code := execCmd(t, newCompareCmd(), "--base="+strings.Join(base, ","), "--head="+strings.Join(head, ","), "--min-effect", me)
		if code != wantCode {
			t.Errorf("--min-effect %s: exit %d, want %d (%s)", me, code, wantCode, errs)
		}
	}
}

// TestCompareBadFlagNamed: a typo names the flag and suggests the right one.
func TestCompareBadFlagNamed(t *testing.T) {
	_, errs, code := execCmd(t, newCompareCmd(), "--base", "a.json", "--head", "b.json", "--alhpa", "0.05")
	if code != 2 || !strings.Contains(errs, "unknown flag --alhpa (did you mean --alpha?)") {
		t.Errorf("exit %d, %q", code, errs)
	}
}

// TestCompareWorkloadsDiffer: c4 trials against c8 trials warn (exit by the verdict), and are
// an error with --strict.
func TestCompareWorkloadsDiffer(t *testing.T) {
	dir := t.TempDir()
	base := writeVLLMTrials(t, mkdir(t, dir, "base"), 4, 1200, 50, 1)
	head := writeVLLMTrials(t, mkdir(t, dir, "head"), 4, 1200, 50, 2)
	for _, p := range head {
		b, _ := os.ReadFile(p)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		m["max_concurrency"] = 8
		b, _ = json.Marshal(m)
		_ = os.WriteFile(p, b, 0o644)
	}
	args := []string{"--base=" + strings.Join(base, ","), "--head=" + strings.Join(head, ",")}
	_, errs, code := execCmd(t, newCompareCmd(), args...)
	if code != 0 || !strings.Contains(errs, "warning: the base and head workloads differ: max_concurrency: base 16, head 8") {
		t.Errorf("exit %d, %q; want exit 0 with a warning naming max_concurrency", code, errs)
	}
	_, errs, code = execCmd(t, newCompareCmd(), append(args, "--strict")...)
	if code != 2 || !strings.Contains(errs, "max_concurrency: base 16, head 8") {
		t.Errorf("--strict: exit %d, %q; want exit 2", code, errs)
	}
}

// TestCompareSkipsAbsentMetrics: a metric one side does not have (old SGLang files have no
// p99_ttft_ms) is not compared, never taken as 0, and a note says so.
func TestCompareSkipsAbsentMetrics(t *testing.T) {
	dir := t.TempDir()
	base := writeVLLMTrials(t, mkdir(t, dir, "base"), 4, 1200, 50, 1)
	head := writeVLLMTrials(t, mkdir(t, dir, "head"), 4, 1200, 50, 2)
	for _, p := range head {
		b, _ := os.ReadFile(p)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		delete(m, "p99_ttft_ms")
		b, _ = json.Marshal(m)
		_ = os.WriteFile(p, b, 0o644)
	}
	out, errs, code := execCmd(t, newCompareCmd(), "--base="+strings.Join(base, ","), "--head="+strings.Join(head, ","), "--gate", "all")
	if code != 0 || !strings.Contains(errs, "not compared (absent from some trial of a side, never taken as 0): p99_ttft_ms") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if strings.Contains(out, "p99_ttft_ms") {
		t.Errorf("p99_ttft_ms compared:\n%s", out)
	}
}
