package engine_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/reckon-ci/reckon/engine"
)

// groupProcs lists the live (non-zombie) processes whose process group is pgid, read
// directly from /proc.
func groupProcs(t *testing.T, pgid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		k := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[k+2:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if pg, _ := strconv.Atoi(f[2]); pg == pgid {
			out = append(out, pid)
		}
	}
	return out
}

// assertGroupGone fails the test when process group pgid still has live processes, and then
// kills them so that a failing test leaves nothing behind.
func assertGroupGone(t *testing.T, pgid int, when string) {
	t.Helper()
	procs := groupProcs(t, pgid)
	if len(procs) == 0 {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for _, p := range procs {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	t.Fatalf("%s, group %d still has %v", when, pgid, procs)
}

// waitNoGroup polls /proc until the group is gone, failing after d.
func waitNoGroup(t *testing.T, pgid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		procs := groupProcs(t, pgid)
		if len(procs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			assertGroupGone(t, pgid, "after the deadline")
		}
		time.Sleep(20 * time.Millisecond) // polling /proc, not waiting for readiness
	}
}

func quietLogger() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(os.Stderr)
	l.SetLevel(logrus.WarnLevel)
	return l
}

func opts(t *testing.T, mode string) engine.LaunchOptions {
	return engine.LaunchOptions{
		Config:       testConfig(mode, nil),
		LogPath:      filepath.Join(t.TempDir(), "engine.log"),
		ReadyTimeout: 30 * time.Second,
		StopGrace:    200 * time.Millisecond,
		Logger:       quietLogger(),
	}
}

func TestLaunchReadyAndStopKillsWholeGroup(t *testing.T) {
	o := opts(t, "ok")
	inst, err := engine.Launch(context.Background(), sglangAdapter(), o)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	pgid := inst.Pid()
	// engine + 2 children + 2 grandchildren, all started before the ready line.
	if n := len(groupProcs(t, pgid)); n < 5 {
		t.Errorf("group %d has %d processes before stop, want >= 5", pgid, n)
	}
	resp, err := http.Get(inst.BaseURL() + "/health")
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("health status %d", resp.StatusCode)
	}
	argv := strings.Join(inst.Argv(), " ")
	for _, want := range []string{"--model-path fake-model", "--host 127.0.0.1", "--port " + strconv.Itoa(inst.Port())} {
		if !strings.Contains(argv, want) {
			t.Errorf("argv %q lacks %q", argv, want)
		}
	}
	rep, err := inst.Report()
	if err != nil {
		t.Fatalf("Report: %v", err)
	}
	if !rep.Ready || rep.KVCacheTokens == nil || *rep.KVCacheTokens != 1024 {
		t.Errorf("report ready=%v kv=%v, want ready and 1024 tokens", rep.Ready, rep.KVCacheTokens)
	}
	if err := inst.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertGroupGone(t, pgid, "after Stop")
	if err := inst.Stop(context.Background()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	select {
	case <-inst.Exited():
	default:
		t.Error("Exited not closed after Stop")
	}
	if len(engine.Running()) != 0 {
		t.Errorf("Running() = %d instances after Stop", len(engine.Running()))
	}
	b, err := os.ReadFile(o.LogPath)
	if err != nil || !strings.Contains(string(b), "child pid=") {
		t.Errorf("log file lacks engine output: %v %q", err, b)
	}
}

func TestLaunchReadyTimeoutKillsGroup(t *testing.T) {
	o := opts(t, "hang")
	o.ReadyTimeout = 3 * time.Second // the fake must have printed its children first, also under load
	_, err := engine.Launch(context.Background(), sglangAdapter(), o)
	var le *engine.LaunchError
	if !errors.As(err, &le) || le.Op != "ready timeout" {
		t.Fatalf("err = %v, want a *LaunchError with Op ready timeout", err)
	}
	if !strings.Contains(le.LogTail, "child pid=") {
		t.Errorf("log tail %q lacks the engine output", le.LogTail)
	}
	pgid := pidFromLog(t, o.LogPath)
	assertGroupGone(t, pgid, "after a readiness timeout")
}

func TestLaunchCrashReportsExitAndKillsOrphans(t *testing.T) {
	o := opts(t, "crash")
	_, err := engine.Launch(context.Background(), sglangAdapter(), o)
	var le *engine.LaunchError
	if !errors.As(err, &le) || le.Op != "exited" {
		t.Fatalf("err = %v, want a *LaunchError with Op exited", err)
	}
	if le.ExitCode != 1 {
		t.Errorf("exit code %d, want 1", le.ExitCode)
	}
	if !strings.Contains(le.LogTail, "CUDA out of memory") || !strings.Contains(err.Error(), "CUDA out of memory") {
		t.Errorf("error lacks the log tail: %v", err)
	}
	// The crashed engine's children (which ignore SIGTERM) were killed with the group.
	pgid := pidFromLog(t, o.LogPath)
	assertGroupGone(t, pgid, "after a crash")
	rep, err := engine.ParseLogFile(o.LogPath, "sglang")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Errors) != 1 || rep.Errors[0].Kind != engine.KindOOM {
		t.Errorf("errors = %+v, want one oom", rep.Errors)
	}
}

// pidFromLog returns the engine pid (= its process group id) that testproc wrote to its log;
// the test cannot ask the Instance once Launch has failed.
func pidFromLog(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "engine pid="); ok {
			pid, _ := strconv.Atoi(strings.TrimSpace(v))
			return pid
		}
	}
	t.Fatalf("no engine pid line in %s", path)
	return 0
}

func TestCancelContextStopsEngine(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	inst, err := engine.Launch(ctx, sglangAdapter(), opts(t, "ok"))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	cancel()
	select {
	case <-inst.Exited():
	case <-time.After(20 * time.Second):
		t.Fatal("engine still running 20s after ctx cancellation")
	}
	waitNoGroup(t, inst.Pid(), 20*time.Second)
}

func TestStopAllOnPanic(t *testing.T) {
	var pgid int
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the original panic", r)
			}
		}()
		defer engine.StopAllOnPanic()
		inst, err := engine.Launch(context.Background(), sglangAdapter(), opts(t, "ok"))
		if err != nil {
			t.Fatalf("Launch: %v", err)
		}
		pgid = inst.Pid()
		panic("boom")
	}()
	assertGroupGone(t, pgid, "after a panic")
}

func TestHarnessSIGINTStopsEngines(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "engine.log")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envHarness+"="+logPath)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading harness output: %v", err)
	}
	var pgid int
	if _, err := fmt.Sscanf(line, "PGID %d", &pgid); err != nil {
		t.Fatalf("harness said %q", line)
	}
	if n := len(groupProcs(t, pgid)); n < 5 {
		t.Fatalf("engine group %d has %d processes, want >= 5", pgid, n)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("harness exit: %v, want death by SIGINT", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("harness exit status %v, want killed by SIGINT (re-raised)", ee)
	}
	assertGroupGone(t, pgid, "after SIGINT to the harness")
}

func TestPortTakenPreCheckPicksAnother(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	o := opts(t, "ok")
	o.Config.Port = taken
	inst, err := engine.Launch(context.Background(), sglangAdapter(), o)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	defer inst.Stop(context.Background())
	if inst.Port() == taken {
		t.Fatalf("engine was given the taken port %d", taken)
	}
}

func TestPortTakenInLogRetries(t *testing.T) {
	o := opts(t, "addr-in-use-once")
	o.Config.Env[envMarker] = filepath.Join(t.TempDir(), "marker")
	inst, err := engine.Launch(context.Background(), sglangAdapter(), o)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	defer inst.Stop(context.Background())
	b, err := os.ReadFile(o.LogPath + ".attempt1")
	if err != nil || !strings.Contains(string(b), "address already in use") {
		t.Fatalf("first attempt's log not kept: %v %q", err, b)
	}
	first := pidFromLog(t, o.LogPath+".attempt1")
	assertGroupGone(t, first, "after the port retry, the first attempt's")
}

func TestPortTakenGivesUpWithPortError(t *testing.T) {
	o := opts(t, "taken")
	o.PortRetries = 1
	_, err := engine.Launch(context.Background(), sglangAdapter(), o)
	var le *engine.LaunchError
	if !errors.As(err, &le) || le.Op != "port" || !errors.Is(err, engine.ErrPortInUse) || le.Attempts != 2 {
		t.Fatalf("err = %v (%+v), want port error after 2 attempts", err, le)
	}
}

func TestLaunchConfigErrors(t *testing.T) {
	o := opts(t, "ok")
	o.Config.MemFractionStatic = 1.5
	_, err := engine.Launch(context.Background(), sglangAdapter(), o)
	var le *engine.LaunchError
	if !errors.As(err, &le) || le.Op != "config" || !strings.Contains(err.Error(), "mem fraction static") {
		t.Fatalf("err = %v, want config error naming mem fraction static", err)
	}
	o = opts(t, "ok")
	o.Config.Command = []string{filepath.Join(t.TempDir(), "no-such-engine")}
	_, err = engine.Launch(context.Background(), sglangAdapter(), o)
	if !errors.As(err, &le) || le.Op != "start" {
		t.Fatalf("err = %v, want start error", err)
	}
}

func TestWaitGPUMemoryReleased(t *testing.T) {
	samples := []int{9000, 4000, 500}
	k := 0
	err := engine.WaitGPUMemoryReleased(context.Background(), func() (int, error) {
		v := samples[min(k, len(samples)-1)]
		k++
		return v, nil
	}, 1000)
	if err != nil || k != 3 {
		t.Fatalf("err=%v after %d samples, want nil after 3", err, k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	err = engine.WaitGPUMemoryReleased(ctx, func() (int, error) { return 9000, nil }, 1000)
	if err == nil || !strings.Contains(err.Error(), "9000 MiB") {
		t.Fatalf("err = %v, want a timeout naming 9000 MiB", err)
	}
}

// TestReadinessModes: under the default (ReadyHTTP) a healthy /health and /v1/models make the
// engine ready without its ready line; ReadyBoth still waits for the line; ReadyHealth does not.
func TestReadinessModes(t *testing.T) {
	o := opts(t, "noline")
	inst, err := engine.Launch(context.Background(), sglangAdapter(), o)
	if err != nil {
		t.Fatalf("default readiness without the ready line: %v", err)
	}
	if inst.ReadyLineSeen() {
		t.Error("ReadyLineSeen = true, but the engine never printed it")
	}
	if err := inst.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertGroupGone(t, inst.Pid(), "after Stop")

	o = opts(t, "noline")
	o.Ready = engine.ReadyBoth
	o.ReadyTimeout = 5 * time.Second // the fake must be serving /health within it, also under load
	_, err = engine.Launch(context.Background(), sglangAdapter(), o)
	var le *engine.LaunchError
	if !errors.As(err, &le) || le.Op != "ready timeout" || !strings.Contains(err.Error(), "GET /health: 200 OK; ready line seen: false") {
		t.Fatalf("ReadyBoth: err = %v, want a ready timeout naming the missing line", err)
	}
	assertGroupGone(t, pidFromLog(t, o.LogPath), "after the readiness timeout")

	o = opts(t, "noline")
	o.Ready = engine.ReadyHealth
	inst, err = engine.Launch(context.Background(), sglangAdapter(), o)
	if err != nil {
		t.Fatalf("ReadyHealth: %v", err)
	}
	if err := inst.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertGroupGone(t, inst.Pid(), "after Stop")
}

// TestReadyByHTTP: the default readiness needs /health 200 and then /v1/models 200; the ready
// line neither suffices nor is needed, and is recorded when it comes.
func TestReadyByHTTP(t *testing.T) {
	t.Run("silent engine", func(t *testing.T) {
		o := opts(t, "silent")
		inst, err := engine.Launch(context.Background(), sglangAdapter(), o)
		if err != nil {
			t.Fatalf("Launch of an engine that logs nothing: %v", err)
		}
		if inst.ReadyLineSeen() {
			t.Error("ReadyLineSeen = true for an engine that printed nothing")
		}
		if err := inst.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		assertGroupGone(t, inst.Pid(), "after Stop")
		if b, _ := os.ReadFile(o.LogPath); len(b) != 0 {
			t.Errorf("the silent engine wrote %q", b)
		}
	})
	t.Run("line seen", func(t *testing.T) {
		inst, err := engine.Launch(context.Background(), sglangAdapter(), opts(t, "ok"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = inst.Stop(context.Background()) }()
		deadline := time.Now().Add(5 * time.Second)
		for !inst.ReadyLineSeen() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // the line may be pumped just after HTTP answered
		}
		if !inst.ReadyLineSeen() {
			t.Error("ReadyLineSeen = false, but the engine printed its ready line")
		}
	})
	for mode, want := range map[string]string{
		"health503": "GET /health: 503 Service Unavailable; GET /v1/models: not polled yet; ready line seen: true",
		"nomodels":  "GET /health: 200 OK; GET /v1/models: 500 Internal Server Error; ready line seen: true",
	} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			o := opts(t, mode)
			// Long enough for the fake engine to be listening on a loaded machine (at 1.5 s a
			// load average of 29 on 2 cores left it unbound: "connection refused", not its 503).
			o.ReadyTimeout = 5 * time.Second
			_, err := engine.Launch(context.Background(), sglangAdapter(), o)
			var le *engine.LaunchError
			if !errors.As(err, &le) || le.Op != "ready timeout" || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want a ready timeout saying %q", err, want)
			}
			assertGroupGone(t, pidFromLog(t, o.LogPath), "after the readiness timeout")
		})
	}
}

// TestLogTailEscapesControlCharacters: the tail that error messages print holds no raw control
// character (an OSC title sequence, NUL, VT, a C1 code) and no line longer than the cap.
func TestLogTailEscapesControlCharacters(t *testing.T) {
	o := opts(t, "ctrl")
	_, err := engine.Launch(context.Background(), sglangAdapter(), o)
	var le *engine.LaunchError
	if !errors.As(err, &le) || le.Op != "exited" {
		t.Fatalf("err = %v, want an exited LaunchError", err)
	}
	lb, _ := os.ReadFile(o.LogPath)
	if !strings.Contains(string(lb), "\x1b]0;pwned") {
		t.Fatalf("the raw log lost the engine's bytes: %.200q", lb)
	}
	for _, r := range le.LogTail {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
			t.Fatalf("log tail holds control character %U: %q", r, le.LogTail)
		}
	}
	if len(le.LogTail) > engine.MaxLogTailBytes {
		t.Errorf("log tail of %d bytes, want at most %d", len(le.LogTail), engine.MaxLogTailBytes)
	}
	for _, want := range []string{`\x1b]0;pwned title\x07 osc\x00nul\x0bvt\u009bc1 ` + "\ufffd bad\ttab", "[... 35904 bytes cut]"} {
		if !strings.Contains(le.LogTail, want) {
			t.Errorf("log tail lacks %q:\n%.400q", want, le.LogTail)
		}
	}
}

// TestLogPathSymlinkNotFollowed: an engine log path that is a symlink (planted in the output
// directory) is replaced, its target left alone.
func TestLogPathSymlinkNotFollowed(t *testing.T) {
	o := opts(t, "ok")
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, o.LogPath); err != nil {
		t.Fatal(err)
	}
	inst, err := engine.Launch(context.Background(), sglangAdapter(), o)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if err := inst.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Errorf("symlink target overwritten: %q", b)
	}
	st, err := os.Lstat(o.LogPath)
	if err != nil || st.Mode()&os.ModeSymlink != 0 || st.Mode().Perm() != 0o644 {
		t.Fatalf("log path: %v, mode %v; want a regular 0644 file", err, st.Mode())
	}
	if b, _ := os.ReadFile(o.LogPath); !strings.Contains(string(b), "fired up") {
		t.Errorf("engine log lacks the engine output: %q", b)
	}
}

// TestContainmentMechanism: the engine runs under a supervisor, in a cgroup of its own where
// cgroup v2 is writable (RECKON_ENGINE_CGROUP=off: subreaper and process group only), and the
// mechanism is reported.
func TestContainmentMechanism(t *testing.T) {
	for _, off := range []bool{false, true} {
		if off {
			t.Setenv(engine.CgroupEnv, "off")
		}
		inst, err := engine.Launch(context.Background(), sglangAdapter(), opts(t, "ok"))
		if err != nil {
			t.Fatalf("Launch: %v", err)
		}
		mech := inst.Containment()
		sup := inst.SupervisorPid()
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", inst.Pid()))
		if k := strings.LastIndexByte(string(stat), ')'); sup == 0 || k < 0 || strings.Fields(string(stat)[k+2:])[1] != strconv.Itoa(sup) {
			t.Errorf("engine %d is not the child of supervisor %d: %s", inst.Pid(), sup, stat)
		}
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", inst.Pid()))
		switch {
		case off && mech != "subreaper+pgroup (cgroup disabled by RECKON_ENGINE_CGROUP=off)":
			t.Errorf("with cgroup off: containment %q", mech)
		case !off && strings.HasPrefix(mech, "cgroup v2 "):
			if !strings.Contains(string(cg), fmt.Sprintf("reckon-engine-%d", sup)) {
				t.Errorf("containment %q but the engine's cgroup is %s", mech, cg)
			}
		case !off && !strings.Contains(mech, "cgroup v2 not used: "):
			t.Errorf("containment %q says neither the cgroup nor why not", mech)
		}
		if err := inst.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		assertGroupGone(t, inst.Pid(), "after Stop ("+mech+")")
		if dir, ok := strings.CutPrefix(mech, "cgroup v2 "); ok {
			dir, _, _ = strings.Cut(dir, " + ")
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("cgroup %s left behind", dir)
			}
		}
	}
}

// TestSupervisorKilledStillStopsTree: if the supervisor itself is SIGKILLed, Stop still leaves
// nothing of the tree (children that ignore SIGTERM, in the engine's group and cgroup).
func TestSupervisorKilledStillStopsTree(t *testing.T) {
	inst, err := engine.Launch(context.Background(), sglangAdapter(), opts(t, "ok"))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	pgid := inst.Pid()
	if err := syscall.Kill(inst.SupervisorPid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inst.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("Exited not closed 10s after the supervisor's death")
	}
	if err := inst.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertGroupGone(t, pgid, "after Stop with a dead supervisor")
}
