//go:build !unix

package safefile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// On systems without O_NOFOLLOW and FIFOs in the Unix sense, the checks are made with Lstat
// before the open and Stat after it.

func open(path string) (*os.File, error) {
	if st, err := os.Lstat(path); err != nil {
		return nil, err
	} else if st.Mode()&os.ModeSymlink != 0 {
		return nil, &os.PathError{Op: "open", Path: path, Err: ErrSymlink}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, st.Mode().Type())}
	}
	return f, nil
}

func openNamed(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, st.Mode().Type())}
	}
	return f, nil
}

func openIn(dir, rel string) (*os.File, error) {
	parts := strings.Split(rel, string(filepath.Separator))
	for i := range parts[:len(parts)-1] {
		p := filepath.Join(dir, filepath.Join(parts[:i+1]...))
		st, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return nil, &os.PathError{Op: "open", Path: p, Err: ErrSymlink}
		}
	}
	return open(filepath.Join(dir, rel))
}
