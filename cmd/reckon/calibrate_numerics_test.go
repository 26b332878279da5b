package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCalibrateNumericsOneCell runs the calibration for one small cell on a freshly built
// reference engine: at tp 2 every correct algorithm is bit-identical (no false alarm, all
// near-bitwise, in the twin check and the oracle check) and every injected fault fails both.
func TestCalibrateNumericsOneCell(t *testing.T) {
	if testing.Short() {
		t.Skip("launches the reference engine")
	}
	inRepoRoot(t)
	eng := filepath.Join(t.TempDir(), "refengine")
	if out, err := exec.Command("go", "build", "-o", eng, "./cmd/refengine").CombinedOutput(); err != nil {
		t.Fatalf("build refengine: %v\n%s", err, out)
	}
	out, errs, code := execCmd(t, newCalibrateNumericsCmd(), "--engine", eng, "--tp", "2", "--dtype", "float32", "--seeds", "1", "--max-tokens", "4")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "| float32 | twin | 2 | correct (negative) | 4 | 0 (0%) | 4 |") || !strings.Contains(out, "| float32 | oracle | 2 | correct (negative) | 1 | 0 (0%) | 1 |") ||
		!strings.Contains(out, "False alarms: 0 of 5 clean comparisons") {
		t.Errorf("negative controls:\n%s", out)
	}
	faults := 0
	for _, l := range strings.Split(out, "\n") {
		if (strings.HasPrefix(l, "| float32 | twin | 2 |") || strings.HasPrefix(l, "| float32 | oracle | 2 |")) && !strings.Contains(l, "correct") {
			faults++
			if !strings.Contains(l, "| 1 | 1 (100%) | 1 |") {
				t.Errorf("fault not detected: %s", l)
			}
		}
	}
	if faults < 10 {
		t.Errorf("%d fault rows, want every float32 fault control:\n%s", faults, out)
	}
}

func TestCalibrateNumericsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--dtype", "fp8"}, {"--batch", "1"}, {"--max-ratio", "0"}, {"--tp", "1"}, {"--first-seed", "0"}} {
		_, errs, code := execCmd(t, newCalibrateNumericsCmd(), args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errs)
		}
	}
}
