//go:build unix

package safefile

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fixture is a directory with a regular file, a FIFO, links to both, a directory and a link to
// a directory.
func fixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "ok.json"), []byte(`{"a":1}`), 0o644))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o644))
	must(os.Symlink("ok.json", filepath.Join(dir, "link.json")))
	must(os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "sub", "in.json"), []byte(`{}`), 0o644))
	must(os.Symlink("sub", filepath.Join(dir, "sublink")))
	return dir
}

// A FIFO, a link and a directory are refused at once (the FIFO has no writer: os.Open would
// block forever); a regular file opens.
func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := fixture(t)
	for _, tc := range []struct{ name, want string }{
		{"ok.json", ""},
		{"fifo.json", "not a regular file (a FIFO)"},
		{"link.json", "symbolic link"},
		{"sub", "not a regular file (a directory)"},
		{"absent.json", "no such file"},
	} {
		f, err := Open(filepath.Join(dir, tc.name))
		if f != nil {
			f.Close()
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := Open(filepath.Join(dir, "fifo.json")); !errors.Is(err, ErrNotRegular) {
		t.Errorf("FIFO: %v is not ErrNotRegular", err)
	}
	if _, err := Open(filepath.Join(dir, "link.json")); !errors.Is(err, ErrSymlink) {
		t.Errorf("link: %v is not ErrSymlink", err)
	}
}

// OpenIn follows no link at any component, and never leaves its directory.
func TestOpenInFollowsNoLink(t *testing.T) {
	dir := fixture(t)
	for _, tc := range []struct{ rel, want string }{
		{"sub/in.json", ""},
		{"sub/../ok.json", ""},
		{"sublink/in.json", "sublink"},
		{"link.json", "symbolic link"},
		{"fifo.json", "a FIFO"},
		{"../x.json", "not a path inside"},
		{"/etc/passwd", "not a path inside"},
		{"", "not a path inside"},
	} {
		f, err := OpenIn(dir, tc.rel)
		if f != nil {
			f.Close()
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.rel, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want %q", tc.rel, err, tc.want)
		}
	}
}

func TestReadFileLimit(t *testing.T) {
	dir := fixture(t)
	if b, err := ReadFile(filepath.Join(dir, "ok.json"), 7); err != nil || string(b) != `{"a":1}` {
		t.Errorf("at the limit: %q %v", b, err)
	}
	if _, err := ReadFile(filepath.Join(dir, "ok.json"), 6); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than the 6") {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := ReadFileIn(dir, "sub/in.json", 6); err != nil {
		t.Errorf("in: %v", err)
	}
}

func TestExcerpt(t *testing.T) {
	if got := Excerpt("short"); got != "short" {
		t.Errorf("short: %q", got)
	}
	long := strings.Repeat("é", 64<<20/2) // 64 MiB of two-byte runes
	got := Excerpt(long)
	if len(got) > ExcerptBytes+40 || !strings.HasSuffix(got, "(67108864 bytes in all)") {
		t.Errorf("long: %d bytes, ends %q", len(got), got[len(got)-30:])
	}
	if !strings.HasPrefix(got, strings.Repeat("é", ExcerptBytes/2)) {
		t.Errorf("cut inside a rune: %q", got[:10])
	}
}

// Two readers share one budget; the second fails once the first has taken most of it.
func TestBudgetIsShared(t *testing.T) {
	b := NewBudget(100)
	r1 := Reader(context.Background(), strings.NewReader(strings.Repeat("x", 60)), b, "one")
	if n, err := io.Copy(io.Discard, r1); err != nil || n != 60 {
		t.Fatalf("first: %d %v", n, err)
	}
	r2 := Reader(context.Background(), strings.NewReader(strings.Repeat("x", 60)), b, "two")
	_, err := io.Copy(io.Discard, r2)
	if !errors.Is(err, ErrTooLarge) || !strings.HasPrefix(err.Error(), "two: more than the 100 bytes") {
		t.Errorf("second: %v", err)
	}
	b.Release(60)
	if err := b.Take(100); err != nil {
		t.Errorf("after release: %v", err)
	}
}

func TestReaderStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := io.Copy(io.Discard, Reader(ctx, strings.NewReader("x"), nil, "trace"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("%v", err)
	}
}

// A path the user named may be a link, but never a FIFO.
func TestOpenNamedFollowsLinksOnly(t *testing.T) {
	dir := fixture(t)
	if b, err := ReadNamed(filepath.Join(dir, "link.json"), 100); err != nil || string(b) != `{"a":1}` {
		t.Errorf("link: %q %v", b, err)
	}
	if _, err := ReadNamed(filepath.Join(dir, "fifo.json"), 100); !errors.Is(err, ErrNotRegular) {
		t.Errorf("FIFO: %v", err)
	}
}
