//go:build linux

package suites

import "golang.org/x/sys/unix"

// statxBirth is the birth time of the entry at p (a link is not followed) in nanoseconds since
// the epoch, 0 where the file system does not record it.
func statxBirth(p string) int64 {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &st); err != nil || st.Mask&unix.STATX_BTIME == 0 {
		return 0
	}
	return st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
}
