//go:build !linux

package main

// filterStdout is a no-op where file descriptors cannot be swapped.
func filterStdout() (restore func()) { return func() {} }
