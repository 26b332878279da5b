//go:build unix && !linux

package engine

import (
	"os"
	"syscall"
)

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

// signalGroup sends sig to process group pgid.
func signalGroup(pgid int, sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }

// raise sends sig to the current process.
func raise(sig syscall.Signal) { _ = syscall.Kill(os.Getpid(), sig) }

// killOwned has nothing to do without /proc.
func killOwned(*ownedLeaders, int) []int { return nil }

// procStart is unknown without /proc.
func procStart(int) uint64 { return 0 }
