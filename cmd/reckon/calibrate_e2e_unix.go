//go:build unix

package main

import (
	"os/exec"
	"syscall"
	"time"
)

// startInOwnGroup makes c (a gate) the leader of its own process group, and its cancellation
// (the context's end: SIGINT to calibrate e2e) a SIGINT to that group: the gate then stops its
// engines and writes its reports; after 30 s it is killed.
func startInOwnGroup(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGINT) }
	c.WaitDelay = 30 * time.Second
}

// killGroup kills whatever is left of c's process group once c has exited (engines are in
// groups of their own, which the gate stops; this catches anything else it started).
func killGroup(c *exec.Cmd) {
	if c.Process != nil {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
}
