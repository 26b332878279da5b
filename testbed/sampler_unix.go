//go:build unix

package testbed

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in its own process group and makes cancellation kill the whole group,
// so that a wrapper script's children (a sleep in a loop) do not outlive the sampler.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
