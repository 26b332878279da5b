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

// No supervisor here: engines are the harness's own children.
const supervisorSupported = false

// CgroupEnv set to "off" makes Launch skip the cgroup (Linux only).
const CgroupEnv = "RECKON_ENGINE_CGROUP"

const (
	superviseEnv   = "RECKON_SUPERVISE"
	superviseProto = "reckon-supervise-1"
)

func supervisorProcAttr() *syscall.SysProcAttr { return sysProcAttr() }
func killCgroup(string)                        {}
func cgroupProcs(string) []int                 { return nil }
func removeCgroupDir(string) error             { return nil }

// RunSupervisor is the supervise mode; it exists on Linux only.
func RunSupervisor([]string) int {
	_, _ = os.Stderr.WriteString("reckon supervise: the engine supervisor runs on Linux only\n")
	return 2
}
