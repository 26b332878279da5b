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
