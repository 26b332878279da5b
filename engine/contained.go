package engine

// runContained runs a short command (the version probe) under the same supervisor and
// containment as an engine launch: its whole process tree, daemons it forks included, is ended
// before runContained returns, also when the command hangs past ctx.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// probeGrace is the time between SIGTERM and SIGKILL for what a probe leaves behind after it
// exited (a probe's leftovers have no state worth a longer grace).
const probeGrace = time.Second

// cgroupMode is the supervisor's --cgroup value: "off" when RECKON_ENGINE_CGROUP=off, else "auto".
func cgroupMode() string {
	if strings.EqualFold(strings.TrimSpace(os.Getenv(CgroupEnv)), "off") {
		return "off"
	}
	return "auto"
}

// runContained runs argv with env under the engine supervisor, its output (stdout and stderr)
// to out, and returns when the supervisor has exited, i.e. when no process of the command's
// tree is left: once the command itself exits, whatever it left running gets SIGTERM and, after
// grace, SIGKILL; when ctx ends first, the whole tree gets SIGKILL at once. mech names the
// containment used (as in the "engine started" log line). err is nil when the command exited
// with status 0; otherwise "exit status N", "signal: S", ctx's error, or why it could not run.
func runContained(ctx context.Context, argv, env []string, out io.Writer, grace time.Duration) (mech string, err error) {
	if len(argv) == 0 {
		return "", errors.New("empty command")
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	statusR, statusW, err := pipe()
	if err != nil {
		return "", fmt.Errorf("create supervisor status pipe: %w", err)
	}
	controlR, controlW, err := pipe()
	if err != nil {
		closeAll()
		return "", fmt.Errorf("create supervisor control pipe: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return "", fmt.Errorf("create output pipe: %w", err)
	}
	args := append([]string{os.Args[0], "supervise", "--pipes", "--grace", grace.String(), "--cgroup", cgroupMode(), "--"}, argv...)
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: args, Env: append(append([]string(nil), env...), superviseEnv+"="+superviseProto)}
	cmd.Stdout, cmd.Stderr = outW, outW
	cmd.ExtraFiles = []*os.File{statusW, controlR}
	cmd.SysProcAttr = supervisorProcAttr()
	onForkThread(func() { err = cmd.Start() })
	_ = statusW.Close()
	_ = controlR.Close()
	_ = outW.Close()
	if err != nil {
		closeAll()
		return "", fmt.Errorf("start the engine supervisor (%s re-executed): %w", os.Args[0], err)
	}
	defer closeAll()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, outR)
	}()
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(waited)
	}()
	type event struct{ kind, text string }
	events := make(chan event)
	go func() {
		defer close(events)
		br := bufio.NewReaderSize(statusR, 4096)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			kind, text, _ := strings.Cut(strings.TrimRight(line, "\n"), " ")
			events <- event{kind, text}
		}
	}()
	send := func(c string) { _, _ = controlW.WriteString(c + "\n") }
	var (
		startFail string
		exited    bool
		exit      exitEv
		gone      bool
		backstop  <-chan time.Time
		ctxDone   = ctx.Done()
	)
	// Once the command exited or ctx ended, the supervisor has its grace plus killWait to end
	// the tree; past that it is killed (its children get SIGKILL from their parent-death signal).
	arm := func() {
		if backstop == nil {
			backstop = time.After(grace + killWait)
		}
	}
loop:
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				break loop
			}
			switch ev.kind {
			case "mech":
				mech = ev.text
			case "startfail":
				startFail = ev.text
			case "exit":
				exited = true
				_, _ = fmt.Sscanf(ev.text, "%d %d", &exit.code, &exit.sig)
				send("term") // the command is done: end whatever it left running
				arm()
			case "gone":
				gone = true
			}
		case <-ctxDone:
			ctxDone = nil
			send("kill")
			arm()
		case <-backstop:
			_ = cmd.Process.Kill()
			killCgroup(cgroupOf(mech))
			<-waited
			go func() {
				for range events { // until the status pipe's end: the reader goroutine exits
				}
			}()
			return mech, fmt.Errorf("processes of %s still running %s after it was asked to end them (supervisor pid %d killed)", argv[0], grace+killWait, cmd.Process.Pid)
		}
	}
	<-waited
	select {
	case <-copied:
	case <-time.After(2 * time.Second): // a process outside the supervisor's reach holds the output
	}
	switch {
	case startFail != "":
		return mech, errors.New(startFail)
	case ctx.Err() != nil:
		return mech, ctx.Err()
	case !gone:
		return mech, fmt.Errorf("the engine supervisor exited (%v) before its tree was gone", cmd.ProcessState)
	case !exited:
		return mech, fmt.Errorf("the engine supervisor exited (%v) before reporting the command's exit", cmd.ProcessState)
	case exit.sig > 0:
		return mech, fmt.Errorf("signal: %v", syscall.Signal(exit.sig))
	case exit.code != 0:
		return mech, fmt.Errorf("exit status %d", exit.code)
	}
	return mech, nil
}

// cgroupOf is the cgroup directory named in a containment description ("" when none).
func cgroupOf(mech string) string {
	dir, ok := strings.CutPrefix(mech, "cgroup v2 ")
	if !ok {
		return ""
	}
	dir, _, _ = strings.Cut(dir, " + ")
	return dir
}
