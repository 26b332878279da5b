// Package safefile opens and reads files that a process reckon does not trust wrote: an engine
// (its torch-profiler traces, its log), a shard job (its results.json and numerics probes). Such
// a process can leave a FIFO where a file was expected, a symbolic link to a file it should not
// make reckon publish, or a file of gigabytes; none of them may hang reckon, redirect it or
// flood its memory and reports.
//
// Open and OpenIn never follow a symbolic link at the last component (OpenIn: at any component
// of the relative path), never block in open(2) (O_NONBLOCK: a FIFO or a device opens at once),
// and return the file only when the open descriptor is a regular file (fstat, so a file swapped
// between a check and the open is judged as what was opened). ReadFile and ReadFileIn read such
// a file under a size limit. Budget bounds the bytes several reads take together (a gzip bomb is
// counted in decompressed bytes by the reader that decompresses it), and Reader stops a read
// when its context ends. Excerpt bounds what an error quotes of a file's content.
package safefile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"unicode/utf8"
)

// ExcerptBytes is the most bytes Excerpt keeps of a string that came from an untrusted file.
const ExcerptBytes = 200

var (
	// ErrNotRegular is the cause of an error opening something that is not a regular file (a
	// FIFO, a device, a socket, a directory).
	ErrNotRegular = errors.New("not a regular file")
	// ErrSymlink is the cause of an error opening a symbolic link, which is never followed.
	ErrSymlink = errors.New("a symbolic link (not followed)")
	// ErrTooLarge is the cause of an error reading more than a file's limit or a Budget.
	ErrTooLarge = errors.New("larger than its limit")
	// ErrNotInside is the cause of an error for a relative path that leaves its directory.
	ErrNotInside = errors.New("not a path inside the directory")
)

// Open opens path for reading without following a symbolic link at its last component and
// without blocking, and returns the file only when it is a regular file. Errors are
// *os.PathError naming path, with ErrSymlink or ErrNotRegular as the cause where they apply.
func Open(path string) (*os.File, error) {
	return open(path)
}

// OpenNamed opens a path the user named (a results.json given on the command line): a symbolic
// link is followed, as the user meant it, but the open never blocks and only a regular file is
// returned.
func OpenNamed(path string) (*os.File, error) {
	return openNamed(path)
}

// ReadNamed reads the file at path, opened as OpenNamed does, refusing one longer than limit
// bytes.
func ReadNamed(path string, limit int64) ([]byte, error) {
	f, err := OpenNamed(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, path, limit)
}

// OpenIn opens rel, a relative path, inside the directory dir, following no symbolic link on
// the way (a link at any component of rel is refused), without blocking, and returns the file
// only when it is a regular file. A rel that is absolute or climbs out of dir ("..") is refused
// with ErrNotInside.
func OpenIn(dir, rel string) (*os.File, error) {
	if rel == "" || filepath.IsAbs(rel) || !filepath.IsLocal(rel) {
		return nil, &os.PathError{Op: "open", Path: rel, Err: ErrNotInside}
	}
	return openIn(dir, filepath.Clean(rel))
}

// ReadFile reads the file at path, opened as Open does, refusing one longer than limit bytes
// (the error names path and the limit, with ErrTooLarge as its cause).
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, path, limit)
}

// ReadFileIn reads rel inside dir, opened as OpenIn does, refusing a file longer than limit bytes.
func ReadFileIn(dir, rel string, limit int64) ([]byte, error) {
	f, err := OpenIn(dir, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, filepath.Join(dir, rel), limit)
}

func readAll(f *os.File, name string, limit int64) ([]byte, error) {
	if st, err := f.Stat(); err == nil && st.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d it may have: %w", name, st.Size(), limit, ErrTooLarge)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: grew past the %d bytes it may have while read: %w", name, limit, ErrTooLarge)
	}
	return b, nil
}

// Excerpt returns s whole when it has at most ExcerptBytes bytes; otherwise its first
// ExcerptBytes (cut at a UTF-8 boundary) followed by how long s is, so that an error about a
// value read from a file never quotes megabytes of it.
func Excerpt(s string) string {
	if len(s) <= ExcerptBytes {
		return s
	}
	cut := ExcerptBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes in all)", s[:cut], len(s))
}

// Budget is a number of bytes that several reads share: each takes what it reads, and a read
// past what is left fails with ErrTooLarge. It is safe for concurrent use.
type Budget struct {
	total int64
	used  atomic.Int64
}

// NewBudget returns a budget of n bytes.
func NewBudget(n int64) *Budget { return &Budget{total: n} }

// Total is the size of the budget.
func (b *Budget) Total() int64 { return b.total }

// Take takes n bytes from the budget, failing (and taking nothing) when fewer are left.
func (b *Budget) Take(n int64) error {
	if b.used.Add(n) > b.total {
		b.used.Add(-n)
		return fmt.Errorf("more than the %d bytes (%d MiB) allowed in all: %w", b.total, b.total>>20, ErrTooLarge)
	}
	return nil
}

// Release gives n bytes back to the budget.
func (b *Budget) Release(n int64) { b.used.Add(-n) }

// Reader returns a reader of r that fails once ctx is done or once what it read would exceed
// budget (nil: no budget). what names the stream in the errors.
func Reader(ctx context.Context, r io.Reader, budget *Budget, what string) io.Reader {
	return &reader{ctx: ctx, r: r, budget: budget, what: what}
}

type reader struct {
	ctx    context.Context
	r      io.Reader
	budget *Budget
	what   string
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", r.what, context.Cause(r.ctx))
	}
	n, err := r.r.Read(p)
	if n > 0 && r.budget != nil {
		if berr := r.budget.Take(int64(n)); berr != nil {
			return n, fmt.Errorf("%s: %w", r.what, berr)
		}
	}
	return n, err
}
