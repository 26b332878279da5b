//go:build linux

package engine_test

// Containment of what an engine's command leaves behind, on whatever cgroup layout the host has
// (v2, v1, hybrid: v1 controllers with v2 at /sys/fs/cgroup/unified), with the cgroup and
// without it (RECKON_ENGINE_CGROUP=off: the supervisor's subreaper and process-group path).
// Issue 34: a wrapper that runs `( setsid sleep 300 & )` before exec'ing the engine.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/engine"
)

// daemonWrapper writes a wrapper script that leaves a daemon of its own (in its own session,
// orphaned at once: its parent, the subshell, exits) and then becomes the engine.
func daemonWrapper(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "wrap.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n( setsid sleep 300 & )\nexec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// containModes runs f with the cgroup where the host allows one and with it switched off.
func containModes(t *testing.T, f func(t *testing.T, marker string)) {
	for _, mode := range []string{"cgroup-auto", "cgroup-off"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "cgroup-off" {
				t.Setenv(engine.CgroupEnv, "off")
			}
			marker := fmt.Sprintf("contain-%d-%s-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"), mode)
			t.Cleanup(func() { killMarkerProcs(t, marker) })
			f(t, marker)
		})
	}
}

// assertNoneLeft fails if a process carrying marker is still alive once the polling deadline
// has passed (processes being killed need a moment to leave /proc on a loaded machine).
func assertNoneLeft(t *testing.T, marker, when string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := markerProcs(t, marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %d processes left: %v", when, len(left), left)
			return
		}
		time.Sleep(20 * time.Millisecond) // polling /proc for the tree to vanish
	}
}

// The version probe of an engine whose command is the daemon-leaving wrapper: the probe answers,
// and nothing it started is left once DetectVersion returns.
func TestVersionProbeLeavesNoDaemon(t *testing.T) {
	wrap := daemonWrapper(t)
	containModes(t, func(t *testing.T, marker string) {
		lc := engine.LaunchConfig{Command: []string{"/bin/sh", wrap, os.Args[0]}, Model: "m",
			Env: map[string]string{envProc: "version", envFaultMarker: marker}}
		v, err := engine.DetectVersion(context.Background(), sglangAdapter(), lc)
		assertNoneLeft(t, marker, "after the version probe")
		if err != nil || v != "0.5.3.post1" {
			t.Errorf("DetectVersion = %q, %v; want 0.5.3.post1", v, err)
		}
	})
}

// A version probe that forks a daemon and hangs, under a run deadline of hours (--timeout): it
// ends at its own limit, the error names the version probe, and no process of it survives. The
// probe reports when its daemon runs; on a box too loaded for it to get there within the limit,
// the limit is doubled and the probe asked again, so the check never passes without a daemon.
func TestVersionProbeHangingWithDaemon(t *testing.T) {
	containModes(t, func(t *testing.T, marker string) {
		for limit := 500 * time.Millisecond; ; limit *= 2 {
			up := filepath.Join(t.TempDir(), "up")
			restore := engine.SetVersionTimeout(limit)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Hour)
			lc := engine.LaunchConfig{Command: []string{os.Args[0]}, Model: "m",
				Env: map[string]string{envProc: "version-daemon-hang", envFaultMarker: marker, envFaultUp: up}}
			_, err := engine.DetectVersion(ctx, sglangAdapter(), lc)
			cancel()
			restore()
			assertNoneLeft(t, marker, "after the hanging version probe")
			want := fmt.Sprintf("ran longer than its limit of %s (engine.DefaultVersionTimeout)", limit)
			if err == nil || !strings.Contains(err.Error(), "version probe") || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want the version probe and its limit named", err)
			}
			if _, err := os.Stat(up); err == nil {
				return
			}
			if limit > time.Minute {
				t.Fatalf("the probe's daemon never came up within a limit of %s", limit)
			}
			t.Logf("the probe's daemon was not up within %s (a loaded box): again with twice the limit", limit)
		}
	})
}

// The engine itself started through the daemon-leaving wrapper: the daemon is part of the tree
// while the engine runs, and Stop leaves nothing of it.
func TestWrapperDaemonEndsWithTheEngine(t *testing.T) {
	wrap := daemonWrapper(t)
	containModes(t, func(t *testing.T, marker string) {
		o := opts(t, "ok")
		o.Config.Command = []string{"/bin/sh", wrap, os.Args[0]}
		o.Config.Env[envFaultMarker] = marker
		inst, err := engine.Launch(context.Background(), sglangAdapter(), o)
		if err != nil {
			t.Fatalf("Launch: %v", err)
		}
		if daemonPid(t, marker) == 0 {
			t.Errorf("the wrapper's daemon is not running before Stop: %v", markerProcs(t, marker))
		}
		if err := inst.Stop(context.Background()); err != nil {
			t.Fatalf("Stop (%s): %v", inst.Containment(), err)
		}
		assertNoneLeft(t, marker, "after Stop ("+inst.Containment()+")")
	})
}

// The supervisor itself SIGKILLed (the OOM killer, a runner's cleanup) while the wrapper's daemon
// runs in a session of its own: the daemon is reparented to PID 1, out of the engine's process
// group. Stop still ends it: through the cgroup where there is one, and without it (the pure
// subreaper path, as on a cgroup v1 host) through the session the supervisor reported.
func TestSupervisorKilledWrapperDaemonEnds(t *testing.T) {
	wrap := daemonWrapper(t)
	containModes(t, func(t *testing.T, marker string) {
		o := opts(t, "ok")
		o.Config.Command = []string{"/bin/sh", wrap, os.Args[0]}
		o.Config.Env[envFaultMarker] = marker
		inst, err := engine.Launch(context.Background(), sglangAdapter(), o)
		if err != nil {
			t.Fatalf("Launch: %v", err)
		}
		daemon := daemonPid(t, marker)
		if daemon == 0 {
			t.Fatalf("the wrapper's daemon is not running: %v", markerProcs(t, marker))
		}
		// Ready to kill: the supervisor has reported the daemon's session.
		deadline := time.Now().Add(20 * time.Second)
		for !slices.Contains(engine.OwnedSessions(inst), daemon) {
			if time.Now().After(deadline) {
				t.Fatalf("the supervisor did not report the daemon's session %d within 20s: %v", daemon, engine.OwnedSessions(inst))
			}
			time.Sleep(20 * time.Millisecond) // polling for the supervisor's report
		}
		if err := syscall.Kill(inst.SupervisorPid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case <-inst.Exited():
		case <-time.After(20 * time.Second):
			t.Fatal("Exited not closed 20s after the supervisor's death")
		}
		if err := inst.Stop(context.Background()); err != nil {
			t.Errorf("Stop (%s): %v", inst.Containment(), err)
		}
		assertNoneLeft(t, marker, "after Stop with a dead supervisor ("+inst.Containment()+")")
	})
}

// The supervisor with neither cgroup nor subreaper (what a host without both leaves): a daemon
// in a session of its own whose parent exits is reparented outside the supervisor's tree; the
// supervisor learned the session while the ppid link held, ends the daemon on stop and exits only
// after it is gone.
func TestSupervisorWithoutSubreaperEndsOrphanedSession(t *testing.T) {
	marker := fmt.Sprintf("contain-%d-nosubreaper", os.Getpid())
	t.Cleanup(func() { killMarkerProcs(t, marker) })
	goFile := filepath.Join(t.TempDir(), "go")
	// The middle shell starts the daemon (setsid: a background job of a non-interactive shell is
	// no group leader, so the daemon leads a new session with its own pid) and exits once told.
	script := `/bin/sh -c 'setsid sleep 300 & while [ ! -e "$GOFILE" ]; do sleep 0.02; done' & exec sleep 1000`
	cmd := exec.Command(os.Args[0], "supervise", "--grace", "300ms", "--cgroup", "off", "--subreaper", "off", "--", "/bin/sh", "-c", script)
	cmd.Env = append(os.Environ(), "RECKON_SUPERVISE=reckon-supervise-1", envFaultMarker+"="+marker, "GOFILE="+goFile)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	saw := func(line string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(lines, line)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	poll := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%s: not within 20s; supervisor said:\n%s\nprocesses: %v", what, strings.Join(lines, "\n"), markerProcs(t, marker))
			}
			time.Sleep(20 * time.Millisecond) // polling for the processes' state
		}
	}
	daemon := 0
	poll("the daemon runs", func() bool {
		daemon = daemonPid(t, marker)
		return daemon != 0
	})
	poll("the supervisor learns the daemon's session", func() bool { return saw("session " + strconv.Itoa(daemon)) })
	if !saw("mech pgroup+sessions (subreaper disabled by --subreaper off) (cgroup disabled by RECKON_ENGINE_CGROUP=off)") {
		t.Errorf("containment not named; supervisor said %v", lines)
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The middle shell exits; with no subreaper the daemon goes to an ancestor outside the tree.
	poll("the daemon leaves the supervisor's tree", func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", daemon))
		if err != nil {
			return false
		}
		k := strings.LastIndexByte(string(st), ')')
		ppid, _ := strconv.Atoi(strings.Fields(string(st)[k+2:])[1])
		return ppid != 0 && !slices.Contains(append(markerPids(t, marker), cmd.Process.Pid), ppid)
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the supervisor did not exit within 20s of SIGTERM")
	}
	if left := markerProcs(t, marker); len(left) > 0 {
		t.Errorf("the supervisor exited with %d processes of its tree alive: %v", len(left), left)
	}
	if !saw("gone") {
		t.Errorf("no 'gone' reported: %v", lines)
	}
}

// markerPids lists the pids of the live processes carrying marker.
func markerPids(t *testing.T, marker string) []int {
	var out []int
	for _, p := range markerProcs(t, marker) {
		pid, _ := strconv.Atoi(strings.Fields(p)[0])
		out = append(out, pid)
	}
	return out
}

// daemonPid is the pid of the live `sleep 300` daemon carrying marker (0 when none).
func daemonPid(t *testing.T, marker string) int {
	for _, p := range markerProcs(t, marker) {
		if f := strings.Fields(p); len(f) == 3 && f[1] == "sleep" && f[2] == "300" {
			pid, _ := strconv.Atoi(f[0])
			return pid
		}
	}
	return 0
}
