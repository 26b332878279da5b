package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/internal/sanitize"
)

// Issue 25, item 5: whatever a command prints passes a consoleWriter (main installs them), so
// an engine line reaches the terminal and the CI log as data, also when it is written in pieces.
func TestConsoleWriterSanitisesLinesAcrossWrites(t *testing.T) {
	var out bytes.Buffer
	cw := &consoleWriter{w: &out, clean: sanitize.CILog}
	for _, piece := range []string{"ERROR \x1b]52;c;ZX", "Zp\x07bad\n", "::add-", "mask::secret\n", "  ##vso[task.setvariable]x\n", "caf", "\xc3", "\xa9 ok", "\n", "tail without newline ::x"} {
		if _, err := cw.Write([]byte(piece)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cw.Flush(); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	want := "ERROR bad\n| ::add-mask::secret\n  #\u200b#vso[task.setvariable]x\ncafé ok\ntail without newline ::x"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// Ginkgo's console output (failure messages quote engine text) goes through the same writer.
func TestProgressFilterOutputIsSanitised(t *testing.T) {
	var out bytes.Buffer
	cw := &consoleWriter{w: &out, clean: sanitize.CILog}
	progressFilter{dst: cw}.copy(strings.NewReader("[FAILED] engine said:\n::stop-commands::tok\n\x1b]0;title\x07done\n"))
	cw.Flush()
	if got := out.String(); got != "[FAILED] engine said:\n| ::stop-commands::tok\ndone\n" {
		t.Errorf("got %q", got)
	}
}
