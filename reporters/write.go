package reporters

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Report file names written by WriteAll.
const (
	JUnitFile    = "junit.xml"
	JSONFile     = "results.json"
	MarkdownFile = "summary.md"
	HTMLFile     = "report.html"
)

// WriteAll writes the four reports of r into dir (created if missing): junit.xml, results.json,
// summary.md and report.html. Each file is written atomically (a temporary file in dir, then a
// rename), so a reader or an interrupted run never sees half a report. A failure to write one
// report does not stop the others; the errors are joined.
func WriteAll(dir string, r *Run) error {
	if r == nil {
		return errors.New("write reports: nil run")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write reports: %w", err)
	}
	writers := []struct {
		name string
		fn   func(io.Writer, *Run) error
	}{
		{JSONFile, WriteJSON}, // first: the lossless record matters most
		{JUnitFile, WriteJUnit},
		{MarkdownFile, WriteMarkdown},
		{HTMLFile, WriteHTML},
	}
	var errs []error
	for _, w := range writers {
		if err := WriteFileAtomic(filepath.Join(dir, w.name), func(out io.Writer) error { return w.fn(out, r) }); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WriteFileAtomic writes path through fill: into a temporary file in the same directory, synced,
// then renamed over path. On any error the temporary file is removed and path is untouched.
func WriteFileAtomic(path string, fill func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 64<<10)
	if err = fill(bw); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
