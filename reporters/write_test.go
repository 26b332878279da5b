package reporters

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/internal/atomicfile"
)

// TestWriteAllSample writes the sample reports; with RECKON_REPORT_SAMPLE=DIR they are kept in
// DIR (docs/img/report-*.png are taken by TestReportsInABrowser).
func TestWriteAllSample(t *testing.T) {
	dir := os.Getenv("RECKON_REPORT_SAMPLE")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := WriteAll(dir, sampleRun()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{JUnitFile, JSONFile, MarkdownFile, HTMLFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() == 0 {
			t.Errorf("%s is empty", f)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*"))
	if len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestWriteAllReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	// A stale report from an earlier run is replaced whole.
	if err := os.WriteFile(filepath.Join(dir, JUnitFile), []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteAll(dir, sampleRun()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, JUnitFile))
	if err != nil || !bytes.HasPrefix(b, []byte("<?xml")) {
		t.Fatalf("junit.xml not replaced: %q %v", b[:min(20, len(b))], err)
	}
	// A failing writer leaves the old file and no temporary file behind.
	err = atomicfile.Write(filepath.Join(dir, JUnitFile), func(w io.Writer) error {
		_, _ = io.WriteString(w, "half a rep")
		return errors.New("disk on fire")
	})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("error not returned: %v", err)
	}
	b2, _ := os.ReadFile(filepath.Join(dir, JUnitFile))
	if !bytes.Equal(b, b2) {
		t.Error("a failed write changed the existing report")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// An unwritable directory is an error naming the path.
	if err := WriteAll(filepath.Join(dir, JUnitFile, "sub"), sampleRun()); err == nil {
		t.Error("writing under a file succeeded")
	}
	if err := WriteAll(dir, nil); err == nil {
		t.Error("nil run accepted")
	}
}

func BenchmarkWriteAll(b *testing.B) {
	r := sampleRun()
	for i := 0; i < 50; i++ { // a large spec: 50 more configs with trials and checks
		c := r.Configs[0]
		c.Name = "cfg-" + strconv.Itoa(i)
		r.Configs = append(r.Configs, c)
		for _, ch := range r.Checks[:5] {
			ch.Config = c.Name
			r.Checks = append(r.Checks, ch)
		}
	}
	dir := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := WriteAll(dir, r); err != nil {
			b.Fatal(err)
		}
	}
}
