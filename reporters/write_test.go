package reporters

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteAllSample writes the sample reports; with RECKON_REPORT_SAMPLE=DIR they are kept in
// DIR (used to take docs/img/report.png).
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
