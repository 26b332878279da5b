package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCalibrateCLI(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "stats.md")
	os.WriteFile(doc, []byte("# x\n\n"+calBegin+"\nold\n"+calEnd+"\n\ntail\n"), 0o644)
	out, errs, code := execCmd(t, newCalibrateCmd(), "--reps", "100", "--null-reps", "1000", "--cv", "2", "--trials", "5", "--effects", "5", "--write-docs", doc)
	if code != 0 {
		t.Fatalf("%d %s", code, errs)
	}
	if !strings.Contains(out, "| CV 2% | 5 |") || !strings.Contains(out, "sequential 5, 10 per side") {
		t.Errorf("table:\n%s", out)
	}
	data, _ := os.ReadFile(doc)
	if strings.Contains(string(data), "old") || !strings.Contains(string(data), "| CV 2% | 5 |") || !strings.HasSuffix(string(data), "tail\n") {
		t.Errorf("doc:\n%s", data)
	}
	if _, _, code := execCmd(t, newCalibrateCmd(), "--looks", "5,3"); code != 2 {
		t.Errorf("bad looks: exit %d", code)
	}
	if _, _, code := execCmd(t, newCalibrateCmd(), "--null-reps", "10"); code != 2 {
		t.Errorf("too few null reps: exit %d", code)
	}
}
