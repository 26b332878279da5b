package suites

import "time"

// exitSettle bounds how long the engine-log check waits for an engine whose measurements failed
// to be seen exiting: a crash under load closes the engine's socket before its exit reaches the
// harness, and a crash must be judged as an infrastructure error, not as a log verdict.
const exitSettle = 3 * time.Second

// settle waits (up to exitSettle) for the config's engine to be seen exiting when one of its
// measurements failed; it returns at once otherwise.
func (cs *configState) settle() {
	if cs.inst == nil || (cs.probeErr == nil && len(cs.measErr) == 0) {
		return
	}
	t := time.NewTimer(exitSettle)
	defer t.Stop()
	select {
	case <-cs.inst.Exited():
	case <-t.C:
	}
}
