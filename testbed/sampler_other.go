//go:build !unix

package testbed

import "os/exec"

// ownGroup is a no-op where process groups do not exist; cancellation kills the command only.
func ownGroup(cmd *exec.Cmd) {}
