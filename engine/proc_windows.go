//go:build windows

package engine

import (
	"os"
	"syscall"
)

// Engines are launched on Linux; on Windows the package builds (for `reckon logs parse`) and
// Launch works without process groups: Stop kills the main process only.

func sysProcAttr() *syscall.SysProcAttr { return nil }

func groupMembers(pid int) []int {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	_ = p.Release()
	return nil
}

func signalGroup(pid int, _ syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

func raise(syscall.Signal) { os.Exit(1) }

// killOwned has nothing to do without /proc.
func killOwned(*ownedLeaders, int) []int { return nil }

// procStart is unknown without /proc.
func procStart(int) uint64 { return 0 }
