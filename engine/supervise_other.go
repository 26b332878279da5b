//go:build !linux

package engine

import (
	"os"
	"syscall"
)

// No supervisor here: engines are the harness's own children.
const supervisorSupported = false

func supervisorProcAttr() *syscall.SysProcAttr { return sysProcAttr() }
func killCgroup(string)                        {}
func cgroupProcs(string) []int                 { return nil }
func removeCgroupDir(string) error             { return nil }

// RunSupervisor is the supervise mode; it exists on Linux only.
func RunSupervisor([]string) int {
	_, _ = os.Stderr.WriteString("reckon supervise: the engine supervisor runs on Linux only\n")
	return 2
}
