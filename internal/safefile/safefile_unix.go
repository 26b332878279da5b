//go:build unix

package safefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// openFlags open a file for reading without following a link at the last component and
// without waiting for a FIFO's writer or a device.
const openFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

func open(path string) (*os.File, error) {
	fd, err := openat(unix.AT_FDCWD, path, openFlags)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: cause(err)}
	}
	return regular(fd, path)
}

func openNamed(path string) (*os.File, error) {
	fd, err := openat(unix.AT_FDCWD, path, openFlags&^unix.O_NOFOLLOW)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return regular(fd, path)
}

func openIn(dir, rel string) (*os.File, error) {
	name := filepath.Join(dir, rel)
	dfd, err := openat(unix.AT_FDCWD, dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	parts := strings.Split(rel, string(filepath.Separator))
	for i, p := range parts[:len(parts)-1] {
		nfd, err := openat(dfd, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC)
		unix.Close(dfd)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: filepath.Join(dir, filepath.Join(parts[:i+1]...)), Err: cause(err)}
		}
		dfd = nfd
	}
	fd, err := openat(dfd, parts[len(parts)-1], openFlags)
	unix.Close(dfd)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: cause(err)}
	}
	return regular(fd, name)
}

// openat is openat(2), retried on EINTR.
func openat(dirfd int, path string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, path, flags, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// cause names what O_NOFOLLOW's errors mean: ELOOP at the last component, ENOTDIR for a link
// where a directory was asked (O_DIRECTORY|O_NOFOLLOW).
func cause(err error) error {
	if errors.Is(err, unix.ELOOP) {
		return ErrSymlink
	}
	return err
}

// regular wraps fd as a file when fstat says it is a regular file; otherwise it closes fd.
func regular(fd int, name string) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: name, Err: err}
	}
	if uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (%s)", ErrNotRegular, typeName(uint32(st.Mode)))}
	}
	return os.NewFile(uintptr(fd), name), nil
}

func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return fmt.Sprintf("file type %#o", mode&unix.S_IFMT)
}
