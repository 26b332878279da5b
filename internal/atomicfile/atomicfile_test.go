package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesOrLeavesUntouched(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "f.json")
	if err := WriteJSON(path, map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "{\n  \"a\": 1\n}\n" {
		t.Fatalf("content %q", b)
	}
	err := Write(path, func(w io.Writer) error {
		_, _ = w.Write([]byte("half"))
		return errors.New("boom")
	})
	if err == nil {
		t.Fatal("want error")
	}
	if b, _ := os.ReadFile(path); string(b) != "{\n  \"a\": 1\n}\n" {
		t.Fatalf("target changed: %q", b)
	}
	if es, _ := os.ReadDir(filepath.Dir(path)); len(es) != 1 {
		t.Fatalf("temporary file left: %v", es)
	}
}
