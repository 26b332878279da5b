package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// TestBaselineRecordForceCorruptIsBadInput: a corrupt stored baseline is bad input (exit 2),
// with or without --force, and is left as it was.
func TestBaselineRecordForceCorruptIsBadInput(t *testing.T) {
	dir := t.TempDir()
	bdir := filepath.Join(dir, "baselines")
	res := writeResults(t, dir, 1, "nccl")
	path := gate.BaselinePath(bdir, "cpu-test-1234", "default")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{{"--force"}, nil, {"--merge", "--force"}} {
		_, errs, code := execCmd(t, newBaselineCmd(), append([]string{"record", "--from", res, "--dir", bdir}, extra...)...)
		if code != 2 || !strings.Contains(errs, path) || !strings.Contains(errs, "unreadable") {
			t.Errorf("record %v on a corrupt baseline: exit %d, %q; want exit 2 naming %s", extra, code, errs, path)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "{not json" {
		t.Errorf("corrupt baseline was changed: %q", b)
	}
}

// TestBaselineShowWarnsMisplaced: a baseline whose content names another testbed or spec than
// its place is listed with a warning.
func TestBaselineShowWarnsMisplaced(t *testing.T) {
	dir := t.TempDir()
	bdir := filepath.Join(dir, "baselines")
	res := writeResults(t, dir, 1, "nccl")
	if _, errs, code := execCmd(t, newBaselineCmd(), "record", "--from", res, "--dir", bdir); code != 0 {
		t.Fatalf("record: %d %s", code, errs)
	}
	right := gate.BaselinePath(bdir, "cpu-test-1234", "default")
	out, errs, code := execCmd(t, newBaselineCmd(), "show", "--dir", bdir)
	if code != 0 || strings.Contains(errs, "warning") || !strings.Contains(out, right) {
		t.Fatalf("show of a well-placed baseline: %d %q %q", code, out, errs)
	}
	wrong := gate.BaselinePath(bdir, "gpu-other-9999", "nightly")
	if err := os.MkdirAll(filepath.Dir(wrong), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(right, wrong); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"show", "--dir", bdir}, {"show", "gpu-other-9999", "--dir", bdir}} {
		out, errs, code = execCmd(t, newBaselineCmd(), args...)
		if code != 0 || !strings.Contains(out, wrong) ||
			!strings.Contains(errs, `warning: `+wrong+` is stored as testbed "gpu-other-9999" spec "nightly" but holds testbed "cpu-test-1234" spec "default"`) {
			t.Errorf("%v: exit %d, out %q, err %q; want a warning naming both", args, code, out, errs)
		}
	}
}
