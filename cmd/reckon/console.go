package main

import (
	"bytes"
	"io"
	"os"
	"sync"

	"golang.org/x/term"

	"github.com/reckon-ci/reckon/internal/sanitize"
)

// maxConsoleLine is the longest partial line a consoleWriter holds back before it writes it.
const maxConsoleLine = 64 << 10

// consoleWriter passes everything written to it on to w a line at a time, through the
// sanitiser of the medium: sanitize.CILog (reckon's stdout and stderr are a CI log when it runs
// in CI), or sanitize.ConsoleColor on a terminal, which keeps colours. Every command's output
// goes through one (main installs them on stdout, stderr and the logger), so that engine text
// quoted anywhere (a log tail, an engine's error line, a label of an imported file) reaches
// the terminal and the CI log as data: no OSC or CSI sequence, no workflow command.
type consoleWriter struct {
	mu      sync.Mutex
	w       io.Writer
	clean   func(string) string
	partial []byte
}

// newConsoleWriter wraps f, choosing the sanitiser by whether f is a terminal.
func newConsoleWriter(f *os.File) *consoleWriter {
	clean := sanitize.CILog
	if term.IsTerminal(int(f.Fd())) {
		clean = sanitize.ConsoleColor
	}
	return &consoleWriter{w: f, clean: clean}
}

// Write writes the complete lines of p (and what was held back before them); an incomplete
// last line waits for its end, for Flush, or until it exceeds maxConsoleLine.
func (c *consoleWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partial = append(c.partial, p...)
	i := bytes.LastIndexByte(c.partial, '\n')
	if i < 0 && len(c.partial) <= maxConsoleLine {
		return len(p), nil
	}
	n := i + 1
	if i < 0 {
		n = len(c.partial)
	}
	_, err := io.WriteString(c.w, c.clean(string(c.partial[:n])))
	c.partial = append(c.partial[:0], c.partial[n:]...)
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is held back.
func (c *consoleWriter) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.partial) == 0 {
		return nil
	}
	_, err := io.WriteString(c.w, c.clean(string(c.partial)))
	c.partial = c.partial[:0]
	return err
}
