package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
)

var (
	registryMu sync.Mutex
	registry   = map[*Instance]struct{}{}
)

func register(i *Instance) {
	registryMu.Lock()
	registry[i] = struct{}{}
	registryMu.Unlock()
}

func unregister(i *Instance) {
	registryMu.Lock()
	delete(registry, i)
	registryMu.Unlock()
}

// Running returns the instances started by Launch that have not been stopped.
func Running() []*Instance {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]*Instance, 0, len(registry))
	for i := range registry {
		out = append(out, i)
	}
	return out
}

// StopAll stops every instance still running, concurrently, and returns their errors joined.
func StopAll(ctx context.Context) error {
	insts := Running()
	errs := make([]error, len(insts))
	var wg sync.WaitGroup
	for k, i := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = i.Stop(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stopAllTimeout bounds StopAll when it runs from a signal or a panic.
func stopAllTimeout() time.Duration {
	grace := DefaultStopGrace
	for _, i := range Running() {
		grace = max(grace, i.grace)
	}
	return grace + killWait + 5*time.Second
}

// StopAllOnSignal installs a SIGINT/SIGTERM handler that stops every running engine and then
// re-raises the signal with its default action (the harness exits as it would have). The
// returned function uninstalls the handler; so does cancelling ctx. Use
// StopAllOnSignalFunc when something else (e.g. Ginkgo) also handles the signal.
func StopAllOnSignal(ctx context.Context) (stop func()) {
	return StopAllOnSignalFunc(ctx, reraise)
}

// StopAllOnSignalFunc is StopAllOnSignal with a custom action after the engines are stopped
// (nil: do nothing more, the signal is considered handled).
func StopAllOnSignalFunc(ctx context.Context, after func(os.Signal)) (stop func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
		})
	}
	go func() {
		select {
		case sig := <-ch:
			logrus.WithField("signal", sig.String()).Warn("signal received: stopping all engines (send it again to kill them now)")
			sctx, cancel := context.WithTimeout(context.Background(), stopAllTimeout())
			stopped := make(chan error, 1)
			go func() { stopped <- StopAll(sctx) }()
			var err error
			select {
			case err = <-stopped:
			case again := <-ch:
				// A second signal: no more grace, SIGKILL to every engine's tree now.
				logrus.WithField("signal", again.String()).Warn("second signal: killing all engines")
				for _, i := range Running() {
					i.kill()
				}
				err = <-stopped
			}
			if err != nil {
				logrus.WithError(err).Error("stopping engines on signal")
			}
			cancel()
			stop()
			if after != nil {
				after(sig)
			}
		case <-ctx.Done():
			stop()
		case <-done:
		}
	}()
	return stop
}

func reraise(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	signal.Reset(s)
	raise(s)
}

// StopAllOnPanic stops every running engine when the goroutine panics, then re-panics. Use it
// directly as a deferred call: `defer engine.StopAllOnPanic()`.
func StopAllOnPanic() {
	r := recover()
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopAllTimeout())
	defer cancel()
	if err := StopAll(ctx); err != nil {
		logrus.WithError(err).Error("stopping engines on panic")
	}
	panic(r)
}

// WaitGPUMemoryReleased polls sample (used GPU memory in MiB, e.g. from testbed) every half
// second until it reports at most thresholdMiB, so that the next launch does not find the GPU
// still occupied by the previous engine. It returns an error naming the last sample when ctx
// ends first.
func WaitGPUMemoryReleased(ctx context.Context, sample func() (usedMiB int, err error), thresholdMiB int) error {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	last, lastErr := -1, error(nil)
	for {
		used, err := sample()
		if err == nil && used <= thresholdMiB {
			return nil
		}
		last, lastErr = used, err
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("wait for GPU memory release: %w (last sample error: %v)", ctx.Err(), lastErr)
			}
			return fmt.Errorf("wait for GPU memory release: %w (still %d MiB used, want <= %d MiB)", ctx.Err(), last, thresholdMiB)
		case <-tick.C:
		}
	}
}
