package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSpecLimits(t *testing.T) {
	var laughs strings.Builder
	laughs.WriteString("l0: &l0 [x, x, x, x, x, x, x, x, x]\n")
	for k := 1; k <= 9; k++ {
		fmt.Fprintf(&laughs, "l%d: &l%d [", k, k)
		for j := 0; j < 9; j++ {
			if j > 0 {
				laughs.WriteString(", ")
			}
			fmt.Fprintf(&laughs, "*l%d", k-1)
		}
		laughs.WriteString("]\n")
	}
	var block strings.Builder
	for k := 0; k < 100; k++ {
		fmt.Fprintf(&block, "%sk%d:\n", strings.Repeat(" ", k), k)
	}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"size", "name: x\n" + strings.Repeat("# padding\n", MaxSpecBytes/10+1), "spec larger than 1 MiB (the limit, spec.MaxSpecBytes)"},
		{"nodes", "name: x\na: [" + strings.Repeat("1,", MaxSpecNodes) + "1]\n", "more than 100000 keys, values and entries (the limit, spec.MaxSpecNodes)"},
		{"flow depth", "name: " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n", "nesting deeper than 64 levels (the limit, spec.MaxSpecDepth)"},
		{"block depth", block.String(), ":65:1: nesting deeper than 64 levels"},
		{"sequence depth", "a:\n  " + strings.Repeat("- ", 80) + "x\n", "nesting deeper than 64 levels"},
		{"alias count", "a: &a 1\nb: [" + strings.Repeat("*a, ", MaxSpecAliases) + "*a]\n", "more than 1000 aliases (*name) (the limit, spec.MaxSpecAliases)"},
		{"alias expansion", laughs.String(), "more than 1048576 nodes (the limit, spec.MaxSpecAliasExpansion)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := Parse([]byte(tc.body), "pr/spec.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "pr/spec.yaml") {
				t.Fatalf("err = %.300v, want one naming pr/spec.yaml and %q", err, tc.want)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %s, want under 2s", d)
			}
		})
	}
	// Load refuses a big file before reading it all.
	p := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(p, make([]byte, MaxSpecBytes+10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p+": spec larger than 1 MiB") {
		t.Errorf("Load(big) = %v", err)
	}
}

// TestSpecLimitsAcceptRealSpecs: no spec of the repository trips the loose scanner (block
// scalars with brackets, quoted '#', '*' and '|' inside strings).
func TestSpecLimitsAcceptRealSpecs(t *testing.T) {
	files, _ := filepath.Glob("../fixtures/specs/*.yaml")
	more, _ := filepath.Glob("../fixtures/specs/*/*.yaml")
	files = append(files, more...)
	if len(files) < 5 {
		t.Fatalf("found %d fixture specs", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkLimits(b, f); err != nil {
			t.Errorf("%v", err)
		}
	}
	tricky := "a: |\n  [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\nb: '*x # [' # *y [\nc: \"*z {\"\n"
	if err := checkLimits([]byte(tricky), "t.yaml"); err != nil {
		t.Errorf("tricky: %v", err)
	}
}
