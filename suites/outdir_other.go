//go:build !unix

package suites

import "os"

// statID is the identity of the entry at p itself, as far as this system tells: its
// modification time stands in for the inode.
func statID(p string) (dirID, os.FileInfo, bool, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return dirID{}, nil, false, err
	}
	return dirID{Ino: uint64(st.ModTime().UnixNano())}, st, true, nil
}
