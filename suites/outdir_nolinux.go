//go:build unix && !linux

package suites

// statxBirth is 0: only Linux's statx is asked for a birth time.
func statxBirth(string) int64 { return 0 }
