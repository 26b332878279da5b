package engine_test

// The fault matrix: {SIGKILL, SIGTERM, SIGINT twice} of the harness x {direct engine, wrapper
// script, wrapper leaving a setsid daemon before exec, engine ignoring SIGTERM, double-forking
// setsid daemon, hanging engine, version probe leaving a daemon and hanging} x {cgroup where
// writable, subreaper and process group only}. Each row starts a harness (this test binary
// re-executed: runFaultHarness) that launches a fake engine tree through engine.Launch, kills
// the harness, and asserts that no process carrying the row's marker in its environment is
// left, within a bounded time. The marker is inherited by every descendant, including
// daemons that left the session, so /proc finds them wherever they were reparented to.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/reckon-ci/reckon/engine"
)

const (
	envFaultEngine  = "RECKON_FAULTENGINE"  // variant: direct | ignore-term | daemon | hang | probe-daemon
	envFaultRole    = "RECKON_FAULTROLE"    // "" (engine) | child | daemon-mid | daemon
	envFaultHarness = "RECKON_FAULTHARNESS" // variant, for the harness mode
	envFaultRow     = "RECKON_FAULTROW"     // the row's marker, given to the harness
	envFaultMarker  = "RECKON_FAULT_MARKER" // the marker in every engine process's environment
	envFaultLog     = "RECKON_FAULTLOG"
	envFaultUp      = "RECKON_FAULTUP" // file the engine creates once its whole tree is up
	// The grace of the matrix's harness: SIGTERM-ignoring rows take at least this long.
	faultGrace = 300 * time.Millisecond
	// faultBound is the most a row may take from the kill to the last process gone.
	faultBound = 6 * time.Second
)

// runFaultEngine is the fake engine of the matrix (and its children).
func runFaultEngine(variant string) {
	ignoreTerm := variant == "ignore-term" || variant == "hang"
	if ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	switch os.Getenv(envFaultRole) {
	case "child", "daemon":
		reportUp()
		select {}
	case "daemon-mid":
		// First fork done and setsid'd (SysProcAttr.Setsid); fork again and exit, leaving the
		// daemon an orphan.
		spawnFault("daemon", false)
		reportUp()
		os.Exit(0)
	}
	if variant == "daemon" || variant == "probe-daemon" {
		mid := spawnFault("daemon-mid", true)
		_, _ = mid.Process.Wait()
	} else {
		spawnFault("child", false)
	}
	if up := os.Getenv(envFaultUp); up != "" {
		_ = os.WriteFile(up, []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	fmt.Printf("fault engine %s pid=%d up\n", variant, os.Getpid())
	if variant == "hang" || variant == "probe-daemon" { // probe-daemon: a --version that hangs
		select {}
	}
	host, port := argValue("--host"), argValue("--port")
	l, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"object":"list","data":[]}`)) })
	go func() { _ = http.Serve(l, mux) }()
	fmt.Println("[2026-11-29 10:00:03] The server is fired up and ready to roll!")
	select {}
}

func reportUp() {
	if f := os.NewFile(3, "up"); f != nil {
		_, _ = f.WriteString("up\n")
		_ = f.Close()
	}
}

// spawnFault starts this binary in a role and waits for it to report that it (and what it
// starts) is up.
func spawnFault(role string, setsid bool) *exec.Cmd {
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Println("pipe:", err)
		os.Exit(3)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envFaultRole+"="+role)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{w}
	if setsid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		fmt.Println("start", role, err)
		os.Exit(3)
	}
	_ = w.Close()
	_, _ = bufio.NewReader(r).ReadString('\n')
	_ = r.Close()
	return cmd
}

// runFaultHarness is the matrix's harness: it launches the row's engine and waits to be killed.
func runFaultHarness(variant string) {
	marker, logPath, up := os.Getenv(envFaultRow), os.Getenv(envFaultLog), os.Getenv(envFaultUp)
	for _, k := range []string{envFaultHarness, envFaultRow, envFaultLog, envFaultUp} {
		_ = os.Unsetenv(k)
	}
	l := logrus.New()
	l.SetOutput(os.Stderr)
	logrus.SetOutput(os.Stderr)
	ctx := context.Background()
	stop := engine.StopAllOnSignal(ctx)
	defer stop()
	engineVariant, command := variant, []string{os.Args[0]}
	if variant == "wrapper" || variant == "wrapper-daemon" {
		engineVariant = "direct"
		command = []string{"/bin/sh", filepath.Join(filepath.Dir(logPath), "wrap.sh"), os.Args[0]}
	}
	if variant == "probe-daemon" {
		// The version probe (engine.DetectVersion) of an engine whose --version leaves a daemon
		// and hangs: the harness is killed while it waits for the probe.
		v, err := engine.DetectVersion(ctx, sglangAdapter(), engine.LaunchConfig{Command: command, Model: "fake-model",
			Env: map[string]string{envFaultEngine: engineVariant, envFaultMarker: marker, envFaultUp: up}})
		fmt.Println("PROBE ENDED:", v, err)
		os.Exit(3)
	}
	inst, err := engine.Launch(ctx, sglangAdapter(), engine.LaunchOptions{
		Config: engine.LaunchConfig{Command: command, Model: "fake-model", Host: "127.0.0.1",
			Env: map[string]string{envFaultEngine: engineVariant, envFaultMarker: marker, envFaultUp: up}},
		LogPath: logPath, ReadyTimeout: 2 * time.Minute, StopGrace: faultGrace,
		HealthInterval: 20 * time.Millisecond, Logger: l,
	})
	if err != nil {
		fmt.Println("LAUNCH FAILED:", err)
		os.Exit(3)
	}
	fmt.Printf("READY %d\n", inst.Pid())
	select {}
}

const gpuLockScript = "../ci/scripts/gpu-lock.sh"

// haveGPULock reports whether the rows can run under ci/scripts/gpu-lock.sh (bash and flock).
func haveGPULock() bool {
	if _, err := os.Stat(gpuLockScript); err != nil {
		return false
	}
	for _, b := range []string{"bash", "flock"} {
		if _, err := exec.LookPath(b); err != nil {
			return false
		}
	}
	return true
}

// markerProcs lists the live processes whose environment holds marker, as "pid cmdline".
func markerProcs(t *testing.T, marker string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	needle := []byte(envFaultMarker + "=" + marker + "\x00")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(env, needle) {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if k := bytes.LastIndexByte(st, ')'); k > 0 && k+2 < len(st) && (st[k+2] == 'Z' || st[k+2] == 'X') {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		out = append(out, fmt.Sprintf("%d %s", pid, strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))))
	}
	return out
}

func killMarkerProcs(t *testing.T, marker string) {
	for _, p := range markerProcs(t, marker) {
		pid, _ := strconv.Atoi(strings.Fields(p)[0])
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

type faultResult struct {
	mech, kill, variant string
	survivors           int
	took                time.Duration
	lockFree            string
	harnessRSSKiB       int64
}

var (
	faultMu      sync.Mutex
	faultResults []faultResult
)

func TestFaultMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("fault matrix: -short")
	}
	mechs := []string{"cgroup", "pgroup"}
	kills := []string{"SIGKILL", "SIGTERM", "SIGINTx2"}
	variants := []string{"direct", "wrapper", "wrapper-daemon", "ignore-term", "daemon", "hang", "probe-daemon"}
	t.Cleanup(func() {
		faultMu.Lock()
		defer faultMu.Unlock()
		sort.Slice(faultResults, func(a, b int) bool {
			x, y := faultResults[a], faultResults[b]
			return x.mech+x.kill+x.variant < y.mech+y.kill+y.variant
		})
		var b strings.Builder
		b.WriteString("| containment | harness killed by | engine | survivors | time to none left | GPU lock free | harness peak RSS |\n|---|---|---|---|---|---|---|\n")
		for _, r := range faultResults {
			fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %.1f MiB |\n", r.mech, r.kill, r.variant, r.survivors, r.took.Round(10*time.Millisecond), r.lockFree, float64(r.harnessRSSKiB)/1024)
		}
		t.Logf("fault matrix:\n%s", b.String())
		if p := os.Getenv("RECKON_FAULT_TABLE"); p != "" {
			_ = os.WriteFile(p, []byte(b.String()), 0o644)
		}
	})
	for _, mech := range mechs {
		for _, kill := range kills {
			for _, variant := range variants {
				t.Run(mech+"/"+kill+"/"+variant, func(t *testing.T) {
					t.Parallel()
					runFaultRow(t, mech, kill, variant)
				})
			}
		}
	}
}

func runFaultRow(t *testing.T, mech, kill, variant string) {
	dir := t.TempDir()
	marker := fmt.Sprintf("row-%d-%s-%s-%s", os.Getpid(), mech, kill, variant)
	logPath, up := filepath.Join(dir, "engine.log"), filepath.Join(dir, "up")
	script := ""
	switch variant {
	case "wrapper":
		// A wrapper that runs the engine as its child (no exec), as shell launchers do.
		script = "#!/bin/sh\n\"$@\"\necho \"wrapper: engine exited with $?\"\n"
	case "wrapper-daemon":
		// A wrapper that leaves a daemon of its own (its own session, orphaned at once) and then
		// becomes the engine (exec): the hybrid-host finding of issue 34.
		script = "#!/bin/sh\n( setsid sleep 300 & )\nexec \"$@\"\n"
	}
	if script != "" {
		if err := os.WriteFile(filepath.Join(dir, "wrap.sh"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { killMarkerProcs(t, marker) }) // whatever a failing row left behind
	// The harness runs under ci/scripts/gpu-lock.sh, as in CI: the locked descriptor is
	// inherited by everything it starts, so the lock is free again only when all of it is gone.
	lock := filepath.Join(dir, "gpu.lock")
	cmd := exec.Command(os.Args[0])
	if haveGPULock() {
		cmd = exec.Command("bash", gpuLockScript, "--timeout", "5", "--lock", lock, "--", os.Args[0])
	}
	cmd.Env = append(os.Environ(), envFaultHarness+"="+variant, envFaultRow+"="+marker, envFaultLog+"="+logPath, envFaultUp+"="+up)
	if mech == "pgroup" {
		cmd.Env = append(cmd.Env, "RECKON_ENGINE_CGROUP=off")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readyCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "READY") || strings.HasPrefix(line, "LAUNCH FAILED") {
				readyCh <- line
			}
		}
		close(readyCh)
	}()
	exited := make(chan error, 1)
	dump := func() string {
		lb, _ := os.ReadFile(logPath)
		return fmt.Sprintf("harness stderr:\n%s\nengine log:\n%s", stderr.String(), lb)
	}
	// Ready to be killed: the engine's whole tree is up (its up file) and, except for the
	// hanging engine, Launch has returned.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(up); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("engine tree not up after 30s\n%s", dump())
		}
		time.Sleep(10 * time.Millisecond) // polling for the file the engine creates
	}
	if variant != "hang" && variant != "probe-daemon" {
		select {
		case line := <-readyCh:
			if !strings.HasPrefix(line, "READY") {
				_ = cmd.Process.Kill()
				t.Fatalf("harness: %q\n%s", line, dump())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("harness not ready after 30s\n%s", dump())
		}
	}
	before := len(markerProcs(t, marker))
	// The harness's peak RSS, read from its own memory map (the rusage of a child of this
	// test process would count this process's memory, shared with it until exec).
	rss := vmHWM(cmd.Process.Pid)
	go func() { exited <- cmd.Wait() }()
	t0 := time.Now()
	switch kill {
	case "SIGKILL":
		_ = cmd.Process.Signal(syscall.SIGKILL)
	case "SIGTERM":
		_ = cmd.Process.Signal(syscall.SIGTERM)
	case "SIGINTx2":
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
			exited <- nil
		case <-time.After(50 * time.Millisecond):
			_ = cmd.Process.Signal(syscall.SIGINT)
		}
	}
	select {
	case <-exited:
	case <-time.After(faultBound + 5*time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Errorf("harness still running %s after %s", faultBound+5*time.Second, kill)
	}
	var left []string
	for {
		left = markerProcs(t, marker)
		if len(left) == 0 || time.Since(t0) > faultBound {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling /proc for the tree to vanish
	}
	took := time.Since(t0)
	lockFree := "n/a"
	if haveGPULock() {
		// What the next CI job does: take the lock, waiting at most 3 s.
		out, err := exec.Command("bash", gpuLockScript, "--timeout", "3", "--lock", lock, "--", "true").CombinedOutput()
		lockFree = "yes"
		if err != nil {
			lockFree = "no"
			t.Errorf("GPU lock still held after %s of the harness: %v\n%s", kill, err, out)
		}
	}
	faultMu.Lock()
	faultResults = append(faultResults, faultResult{mech: mech, kill: kill, variant: variant, survivors: len(left), took: took, lockFree: lockFree, harnessRSSKiB: rss})
	faultMu.Unlock()
	if rss > 100<<10 {
		t.Errorf("harness peak RSS %d KiB, want < 100 MiB", rss)
	}
	if before < 2 {
		t.Errorf("only %d marked processes before the kill, want the engine and its child at least", before)
	}
	if len(left) > 0 {
		t.Errorf("%d of %d processes survive %s of the harness after %s: %v\n%s", len(left), before, kill, took.Round(time.Millisecond), left, dump())
	}
}

// vmHWM is the peak resident set of a live process in KiB (/proc/PID/status), 0 if unknown.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
