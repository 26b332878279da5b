//go:build !linux

package engine

import "syscall"

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupMembers reports the group leader while the process group exists (no /proc here).
func groupMembers(pgid int) []int {
	if syscall.Kill(-pgid, 0) == nil {
		return []int{pgid}
	}
	return nil
}
