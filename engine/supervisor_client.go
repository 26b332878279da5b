package engine

// The supervisor's client half: the harness starts the supervisor (supervise_linux.go, the
// server half) over two pipes, reads its status lines and sends it control commands.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
)

// supervisorStartTimeout bounds the wait for the supervisor's first report.
const supervisorStartTimeout = 30 * time.Second

// startSupervised starts the engine under a supervisor (this binary re-executed in supervise
// mode, see supervise_linux.go) and waits for the engine's pid.
func (i *Instance) startSupervised(ctx context.Context, out *os.File, env []string, opts LaunchOptions) error {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("create supervisor status pipe: %w", err)
	}
	controlR, controlW, err := os.Pipe()
	if err != nil {
		_ = statusR.Close()
		_ = statusW.Close()
		return fmt.Errorf("create supervisor control pipe: %w", err)
	}
	args := append([]string{os.Args[0], "supervise", "--pipes", "--grace", i.grace.String(), "--cgroup", cgroupMode(), "--"}, i.argv...)
	// /proc/self/exe: this very binary, even when the file was replaced or deleted meanwhile.
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: args, Env: append(env, superviseEnv+"="+superviseProto)}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.ExtraFiles = []*os.File{statusW, controlR}
	cmd.SysProcAttr = supervisorProcAttr()
	onForkThread(func() { err = cmd.Start() })
	_ = statusW.Close()
	_ = controlR.Close()
	if err != nil {
		_ = statusR.Close()
		_ = controlW.Close()
		return fmt.Errorf("start the engine supervisor (%s re-executed): %w", os.Args[0], err)
	}
	i.cmd, i.control, i.supervised = cmd, controlW, true
	i.owned.since = procStart(cmd.Process.Pid)
	go func() {
		_ = cmd.Wait()
		i.ctlMu.Lock()
		_ = controlW.Close()
		i.control = nil
		i.ctlMu.Unlock()
		close(i.supDone)
	}()
	br := bufio.NewReaderSize(statusR, 4096)
	type first struct {
		pid  int
		mech string
		err  error
	}
	firstCh := make(chan first, 1)
	go func() {
		var f first
		for f.pid == 0 || f.mech == "" {
			line, err := br.ReadString('\n')
			if err != nil {
				if f.err == nil {
					f.err = fmt.Errorf("the engine supervisor exited before starting the engine (%v)", err)
				}
				break
			}
			kind, text, _ := strings.Cut(strings.TrimRight(line, "\n"), " ")
			switch kind {
			case "pid":
				f.pid, _ = strconv.Atoi(text)
			case "mech":
				f.mech = text
			case "startfail":
				f.err = errors.New(text)
			case "log":
				i.supervisorLog(opts.Logger, text)
			case "group", "session":
				i.learnOwned(kind, text)
			}
			if f.err != nil {
				break
			}
		}
		firstCh <- f
	}()
	timer := time.NewTimer(supervisorStartTimeout)
	defer timer.Stop()
	var f first
	select {
	case f = <-firstCh:
	case <-ctx.Done():
		f.err = fmt.Errorf("waiting for the engine supervisor: %w", ctx.Err())
	case <-timer.C:
		f.err = fmt.Errorf("the engine supervisor did not report the engine's pid within %s", supervisorStartTimeout)
	}
	if f.err != nil {
		i.sendControl("kill")
		select {
		case <-i.supDone:
		case <-time.After(killWait):
			_ = cmd.Process.Kill()
		}
		_ = statusR.Close()
		return f.err
	}
	i.pid, i.mech = f.pid, f.mech
	i.cgDir = cgroupOf(f.mech)
	i.log = opts.Logger.WithFields(logrus.Fields{"engine": i.adapter.Name(), "pid": i.pid, "port": i.cfg.Port})
	go i.readStatus(br, statusR)
	return nil
}

// The parent-death signal of a child fires when the thread that forked it exits, not the
// process (golang/go#27505): supervisors are forked from one goroutine locked to its thread
// for good, so that no Go scheduling decision can stop an engine.
var forker struct {
	once sync.Once
	reqs chan func()
}

func onForkThread(f func()) {
	forker.once.Do(func() {
		forker.reqs = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the harness
			for f := range forker.reqs {
				f()
			}
		}()
	})
	done := make(chan struct{})
	forker.reqs <- func() { defer close(done); f() }
	<-done
}

// readStatus follows the supervisor's status lines until it exits.
func (i *Instance) readStatus(br *bufio.Reader, r *os.File) {
	defer close(i.statusDone)
	defer r.Close()
	exited := false
	markExited := func(code int, err error) {
		if exited {
			return
		}
		exited = true
		i.exitCode, i.exitErr = code, err
		close(i.exited)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			<-i.supDone
			st := i.cmd.ProcessState
			markExited(-1, fmt.Errorf("the engine supervisor exited (%v) before reporting the engine's exit", st))
			return
		}
		kind, text, _ := strings.Cut(strings.TrimRight(line, "\n"), " ")
		switch kind {
		case "exit":
			var code, sig int
			_, _ = fmt.Sscanf(text, "%d %d", &code, &sig)
			switch {
			case sig > 0:
				markExited(-1, fmt.Errorf("signal: %v", syscall.Signal(sig)))
			case code != 0:
				markExited(code, fmt.Errorf("exit status %d", code))
			default:
				markExited(0, nil)
			}
		case "gone":
			i.gone.Store(true)
		case "log":
			i.supervisorLog(i.log, text)
		case "group", "session":
			i.learnOwned(kind, text)
		}
	}
}

// learnOwned records a process group or session the supervisor saw created in the tree.
func (i *Instance) learnOwned(kind, text string) {
	if id, err := strconv.Atoi(text); err == nil && id > 1 {
		i.owned.add(kind, id)
	}
}

func (i *Instance) supervisorLog(l logrus.FieldLogger, text string) {
	level, msg, _ := strings.Cut(text, " ")
	e := l.WithField("from", "supervisor")
	switch level {
	case "error":
		e.Error(msg)
	case "warn":
		e.Warn(msg)
	default:
		e.Info(msg)
	}
}

// sendControl writes a command to the supervisor (errors mean it is gone already).
func (i *Instance) sendControl(c string) {
	i.ctlMu.Lock()
	defer i.ctlMu.Unlock()
	if i.control != nil {
		_, _ = i.control.WriteString(c + "\n")
	}
}

// stopSupervised asks the supervisor to stop the engine's tree (SIGTERM, its grace, SIGKILL) and
// waits until the supervisor has exited, which it does only when no process of the tree is
// left. ctx ending cuts the grace short (SIGKILL). Should the supervisor die without having
// reported the tree gone, the harness kills the cgroup and the process group itself.
func (i *Instance) stopSupervised(ctx context.Context) error {
	start := time.Now()
	var err error
	i.sendControl("term")
	backstop := time.NewTimer(i.grace + 2*time.Second) // the supervisor keeps its own grace
	defer backstop.Stop()
	select {
	case <-i.supDone:
	case <-ctx.Done():
		i.sendControl("kill")
	case <-backstop.C:
		i.sendControl("kill")
	}
	select {
	case <-i.supDone:
	case <-time.After(killWait):
		err = fmt.Errorf("stop engine pid %d: processes of its tree still running %s after SIGKILL (supervisor pid %d keeps trying)", i.pid, killWait, i.cmd.Process.Pid)
	}
	if err == nil {
		// Its last words ("gone") are read before they are judged.
		select {
		case <-i.statusDone:
		case <-time.After(2 * time.Second):
		}
	}
	if err == nil && !i.gone.Load() {
		// The supervisor died (killed by someone) before the tree was gone.
		i.log.WithField("supervisor", i.cmd.ProcessState).Warn("engine supervisor died before its tree was gone; killing the cgroup, the process group and the groups and sessions the tree created")
		left := func() []int {
			killCgroup(i.cgDir)
			signalGroup(i.pid, syscall.SIGKILL)
			return append(append(groupMembers(i.pid), cgroupProcs(i.cgDir)...), killOwned(&i.owned, os.Getpid())...)
		}
		deadline := time.Now().Add(killWait)
		for l := left(); len(l) > 0; l = left() {
			if time.Now().After(deadline) {
				err = fmt.Errorf("stop engine pid %d: processes still running after SIGKILL: %v", i.pid, l)
				break
			}
			time.Sleep(20 * time.Millisecond) // polling /proc for the processes to vanish
		}
		if i.cgDir != "" {
			_ = removeCgroupDir(i.cgDir)
		}
	}
	select {
	case <-i.exited:
	case <-time.After(2 * time.Second):
	}
	select {
	case <-i.readerDone:
	case <-time.After(2 * time.Second):
	}
	if cerr := i.logFile.Close(); cerr != nil && err == nil && !errors.Is(cerr, os.ErrClosed) {
		err = fmt.Errorf("close engine log: %w", cerr)
	}
	i.log.WithFields(logrus.Fields{"took": time.Since(start).Round(time.Millisecond), "containment": i.mech}).Info("engine stopped")
	return err
}
