package reporters

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/atomicfile"
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
func WriteAll(dir string, r *gate.Run) error {
	if r == nil {
		return errors.New("write reports: nil run")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write reports: %w", err)
	}
	writers := []struct {
		name string
		fn   func(io.Writer, *gate.Run) error
	}{
		{JSONFile, gate.WriteResults}, // first: the lossless record matters most
		{JUnitFile, WriteJUnit},
		{MarkdownFile, WriteMarkdown},
		{HTMLFile, WriteHTML},
	}
	var errs []error
	for _, w := range writers {
		if err := atomicfile.Write(filepath.Join(dir, w.name), func(out io.Writer) error { return w.fn(out, r) }); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
