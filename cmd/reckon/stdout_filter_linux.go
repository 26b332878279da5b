//go:build linux

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// filterStdout routes file descriptor 1 (where Ginkgo's reporter writes) through progressFilter
// until the returned function is called, which restores it and flushes what was written.
func filterStdout() (restore func()) {
	saved, err := unix.Dup(1)
	if err != nil {
		return func() {}
	}
	r, w, err := os.Pipe()
	if err != nil {
		unix.Close(saved)
		return func() {}
	}
	if err := unix.Dup3(int(w.Fd()), 1, 0); err != nil {
		r.Close()
		w.Close()
		unix.Close(saved)
		return func() {}
	}
	out := os.NewFile(uintptr(saved), "stdout")
	done := make(chan struct{})
	go func() {
		defer close(done)
		cw := newConsoleWriter(out) // Ginkgo prints failure messages, which quote engine text
		progressFilter{dst: cw}.copy(r)
		cw.Flush()
	}()
	return func() {
		_ = unix.Dup3(saved, 1, 0) // fd 1 is the terminal again
		w.Close()                  // the pipe's last writer gone: the copier sees EOF
		<-done
		r.Close()
	}
}
