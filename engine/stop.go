// stop.go holds how an Instance is stopped: SIGTERM to its group, the grace period, then
// SIGKILL.

package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// kill skips the rest of the grace: SIGKILL to the engine's whole tree now.
func (i *Instance) kill() {
	if i.supervised {
		i.sendControl("kill")
		return
	}
	signalGroup(i.pid, syscall.SIGKILL)
}

// Stop stops the engine's whole process tree: SIGTERM, up to the stop grace for every
// process of it (its cgroup, its process group, every descendant the supervisor reaped) to
// exit, then SIGKILL. It waits until none is left, closes the log, and is idempotent: later
// and concurrent calls wait for the first one and return its result. ctx bounds the grace
// period.
func (i *Instance) Stop(ctx context.Context) error {
	i.stopOnce.Do(func() {
		i.stopErr = i.stop(ctx)
		unregister(i)
		close(i.stopDone)
	})
	select {
	case <-i.stopDone:
		return i.stopErr
	case <-ctx.Done():
		return fmt.Errorf("stop engine pid %d: %w", i.pid, ctx.Err())
	}
}

// alive reports whether the main process or any process of its group is still running.
func (i *Instance) alive() bool {
	select {
	case <-i.exited:
	default:
		return true
	}
	return len(groupMembers(i.pid)) > 0
}

func (i *Instance) stop(ctx context.Context) error {
	if i.supervised {
		return i.stopSupervised(ctx)
	}
	start := time.Now()
	signalAll := func(sig syscall.Signal) { signalGroup(i.pid, sig) }
	waitGone := func(d time.Duration, ctx context.Context) bool {
		deadline := time.NewTimer(d)
		defer deadline.Stop()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if !i.alive() {
				return true
			}
			select {
			case <-deadline.C:
				return false
			case <-ctx.Done():
				return false
			case <-tick.C:
			}
		}
	}
	var err error
	if i.alive() {
		signalAll(syscall.SIGTERM)
		if !waitGone(i.grace, ctx) {
			i.log.WithField("grace", i.grace).Warn("engine did not stop after SIGTERM; sending SIGKILL")
			signalAll(syscall.SIGKILL)
			if !waitGone(killWait, context.Background()) {
				err = fmt.Errorf("stop engine pid %d: processes still running after SIGKILL: %v", i.pid, groupMembers(i.pid))
			}
		}
	}
	select {
	case <-i.exited:
	case <-time.After(killWait):
		if err == nil {
			err = fmt.Errorf("stop engine pid %d: main process not reaped", i.pid)
		}
	}
	select {
	case <-i.readerDone:
	case <-time.After(2 * time.Second):
	}
	if cerr := i.logFile.Close(); cerr != nil && err == nil && !errors.Is(cerr, os.ErrClosed) {
		err = fmt.Errorf("close engine log: %w", cerr)
	}
	i.log.WithField("took", time.Since(start).Round(time.Millisecond)).Info("engine stopped")
	return err
}
