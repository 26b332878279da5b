//go:build unix

package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/reckon-ci/reckon/engine"
)

// The log the harness wrote while an engine ran is read without following a link or waiting on
// a FIFO the engine may have put at its path; a log the user names may be a link.
func TestParseEngineLogRefusesLinkAndFIFO(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("[2026-01-01 00:00:00] ERROR token=hunter2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "a.log")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.ParseEngineLog(link, "sglang"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("link: %v", err)
	}
	if _, err := engine.ParseLogFile(link, "sglang"); err != nil {
		t.Errorf("a user-named link: %v", err)
	}
	fifo := filepath.Join(dir, "b.log")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, parse := range []func(string, string) (*engine.Report, error){engine.ParseEngineLog, engine.ParseLogFile} {
		if _, err := parse(fifo, "sglang"); err == nil || !strings.Contains(err.Error(), "a FIFO") {
			t.Errorf("FIFO: %v", err)
		}
	}
}
