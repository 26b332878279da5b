//go:build unix

package suites

import (
	"os"
	"syscall"
)

// statID is the identity of the entry at p itself (a link is not followed): its device and
// inode, and on Linux its birth time (statxBirth), since a directory removed and made again
// often gets the same inode number back. ok is false when the system does not say.
func statID(p string) (dirID, os.FileInfo, bool, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return dirID{}, nil, false, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return dirID{}, st, false, nil
	}
	id := dirID{Dev: uint64(sys.Dev), Ino: uint64(sys.Ino)} //nolint:unconvert // not uint64 on every system
	id.Birth = statxBirth(p)
	return id, st, true, nil
}
