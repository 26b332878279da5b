//go:build unix

package profile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/reckon-ci/reckon/internal/safefile"
)

// An engine that leaves a FIFO (or a link) where a trace was is refused at once; os.Open would
// wait for a writer forever and hang the gate.
func TestParseFilesRefusesFIFOAndLink(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "a-TP-0.trace.json", kinetoTrace(0, kernel(ncclRing, 1)), false)
	fifo := filepath.Join(dir, "b-TP-1.trace.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "c-TP-2.trace.json")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFiles(context.Background(), []string{good, fifo}); !errors.Is(err, safefile.ErrNotRegular) || !strings.Contains(err.Error(), "a FIFO") {
		t.Errorf("FIFO: %v", err)
	}
	if _, err := ParseFiles(context.Background(), []string{good, link}); !errors.Is(err, safefile.ErrSymlink) {
		t.Errorf("link: %v", err)
	}
}

// A trace whose "traceEvents" (or a key, or a kernel name) is a string of megabytes is quoted
// in at most an excerpt: the error goes into results.json and the console.
func TestHugeStringsAreNotEchoed(t *testing.T) {
	huge := strings.Repeat("A", 8<<20)
	for name, doc := range map[string]string{
		"events": `{"traceEvents": "` + huge + `"}`,
		"key":    `{"` + huge + `": }`,
		"bare":   `"` + huge + `"`,
	} {
		_, err := Parse(context.Background(), strings.NewReader(doc), "x.json")
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if n := len(err.Error()); n > 1024 {
			t.Errorf("%s: the error has %d bytes", name, n)
		}
		if !strings.Contains(err.Error(), "bytes in all") {
			t.Errorf("%s: the excerpt does not say how long the string was: %.300s", name, err)
		}
	}
	fc, err := Parse(context.Background(), strings.NewReader(kinetoTrace(0, kernel("custom_allreduce_"+huge, 1))), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(fc.Kernels) != 1 || len(fc.Kernels[0]) > 256 || fc.CustomAllReduce != 1 {
		t.Errorf("kernel name kept with %d bytes (%d custom)", len(fc.Kernels[0]), fc.CustomAllReduce)
	}
}

// One gzip bomb under many names (hard links) is bounded by the total budget over every file
// of the window, counted in decompressed bytes, not by the per-file limit alone.
func TestParseFilesTotalBudget(t *testing.T) {
	oldTotal := maxTotalTraceBytes
	maxTotalTraceBytes = 1 << 20
	defer func() { maxTotalTraceBytes = oldTotal }()
	// About 400 KiB of valid trace that compresses to a few KiB.
	evs := make([]string, 0, 2000)
	for k := range 2000 {
		evs = append(evs, kernel(ncclRing, float64(k)))
	}
	dir := t.TempDir()
	first := writeFile(t, dir, "bomb-TP-0.trace.json.gz", kinetoTrace(0, evs...), true)
	if st, _ := os.Stat(first); st.Size() > 64<<10 {
		t.Fatalf("fixture compresses to %d bytes", st.Size())
	}
	paths := []string{first}
	for i := 1; i < 8; i++ {
		p := filepath.Join(dir, "bomb-TP-"+string(rune('0'+i))+".trace.json.gz")
		if err := os.Link(first, p); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	if _, err := ParseFiles(context.Background(), paths[:2]); err != nil {
		t.Fatalf("two files fit the budget: %v", err)
	}
	_, err := ParseFiles(context.Background(), paths)
	if !errors.Is(err, safefile.ErrTooLarge) || !strings.Contains(err.Error(), "allowed in all") || !strings.Contains(err.Error(), "bomb-TP-") {
		t.Fatalf("eight hard links of one trace: %v, want the total budget named", err)
	}
}
