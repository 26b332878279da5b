package engine_test

// The test binary doubles as the fake engine ("testproc") and as a small harness process:
// TestMain looks at RECKON_TESTPROC / RECKON_TESTHARNESS before the testing package parses
// flags. testproc forks children that fork grandchildren; all of them ignore SIGTERM, so only
// the SIGKILL of the whole process group gets rid of them.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/engine"
)

const (
	envProc    = "RECKON_TESTPROC" // mode: ok | noline | silent | health503 | nomodels | crash | hang | addr-in-use-once | taken | ctrl | version | version-hang
	envChild   = "RECKON_TESTPROC_CHILD"
	envMarker  = "RECKON_TESTPROC_MARKER"
	envHarness = "RECKON_TESTHARNESS" // log path for the harness mode
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envChild) != "":
		runChild()
	case os.Getenv(envProc) != "":
		runTestproc(os.Getenv(envProc))
	case os.Getenv(envHarness) != "":
		runHarness(os.Getenv(envHarness))
	case os.Getenv(envFaultEngine) != "":
		runFaultEngine(os.Getenv(envFaultEngine))
	case os.Getenv(envFaultHarness) != "":
		runFaultHarness(os.Getenv(envFaultHarness))
	}
	os.Exit(m.Run())
}

func argValue(name string) string {
	for k, a := range os.Args {
		if a == name && k+1 < len(os.Args) {
			return os.Args[k+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// spawnChild starts a copy of this binary in child mode (depth d) and waits until it reports,
// on an extra pipe, that its own subtree is running.
func spawnChild(depth int) {
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Println("pipe:", err)
		os.Exit(3)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envChild+"="+strconv.Itoa(depth), envProc+"=")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		fmt.Println("start child:", err)
		os.Exit(3)
	}
	_ = w.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	_ = r.Close()
	fmt.Printf("child pid=%d depth=%d %s", cmd.Process.Pid, depth, line)
}

func runChild() {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
	depth, _ := strconv.Atoi(os.Getenv(envChild))
	if depth < 2 {
		spawnChild(depth + 1)
	}
	ready := os.NewFile(3, "ready")
	fmt.Fprintf(ready, "up\n")
	_ = ready.Close()
	select {}
}

func runTestproc(mode string) {
	signal.Ignore(syscall.SIGTERM)
	switch mode {
	case "version": // a version command: warnings first, then the version
		fmt.Fprintln(os.Stderr, "INFO 06-14 04:58:29 [__init__.py:216] Automatically detected platform cuda.")
		fmt.Println("0.5.3.post1")
		os.Exit(0)
	case "version-none":
		fmt.Println("usage: engine [--help]")
		os.Exit(0)
	case "version-fail":
		fmt.Println("ModuleNotFoundError: No module named 'sglang'")
		os.Exit(1)
	case "version-hang":
		spawnChild(1)
		select {}
	case "version-daemon-hang": // a version command that leaves a setsid daemon (orphaned at once) and hangs
		if err := exec.Command("/bin/sh", "-c", "( setsid sleep 300 & )").Run(); err != nil {
			fmt.Println("start daemon:", err)
			os.Exit(3)
		}
		if up := os.Getenv(envFaultUp); up != "" { // the daemon runs: the test may judge
			_ = os.WriteFile(up, nil, 0o644)
		}
		select {}
	case "silent": // an engine logging at WARNING: no line at all
		if devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
			os.Stdout = devnull
		}
	}
	host, port := argValue("--host"), argValue("--port")
	if host == "" {
		host = "127.0.0.1"
	}
	fmt.Printf("engine pid=%d\n", os.Getpid())
	fmt.Println("[2026-11-29 10:00:00] server_args=ServerArgs(model_path='fake', tp_size=1)")
	spawnChild(1)
	spawnChild(1)
	switch mode {
	case "ctrl": // control characters a terminal would obey
		for range 59 {
			fmt.Println(strings.Repeat("M", 4000))
		}
		fmt.Println(strings.Repeat("L", 40_000))
		fmt.Print("\x1b]0;pwned title\x07 osc\x00nul\x0bvt\u009bc1 \xff bad\ttab\n")
		os.Exit(1)
	case "crash":
		fmt.Println("[2026-11-29 10:00:01] Scheduler hit an exception: Traceback (most recent call last):")
		fmt.Println(`  File "/fake/scheduler.py", line 10, in run`)
		fmt.Println("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
		os.Exit(1)
	case "hang":
		select {}
	case "addr-in-use-once":
		marker := os.Getenv(envMarker)
		if _, err := os.Stat(marker); err != nil {
			_ = os.WriteFile(marker, []byte("x"), 0o644)
			fmt.Printf("ERROR:    [Errno 98] error while attempting to bind on address ('%s', %s): address already in use\n", host, port)
			select {} // a real engine may linger; the harness must react to the log line
		}
	case "taken":
		fmt.Printf("OSError: [Errno 98] Address already in use\n")
		os.Exit(1)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		fmt.Printf("ERROR:    [Errno 98] error while attempting to bind on address: %v\n", err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
		if mode == "health503" { // still starting, forever
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		if mode == "nomodels" {
			http.Error(w, "model not loaded", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"fake-model","object":"model"}]}`))
	})
	go func() { _ = http.Serve(l, mux) }()
	fmt.Println("[2026-11-29 10:00:02] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1,024, K size: 0.50 GB, V size: 0.50 GB")
	if mode != "noline" { // noline: healthy HTTP server, but the ready line never comes
		fmt.Println("[2026-11-29 10:00:03] The server is fired up and ready to roll!")
	}
	select {}
}

// runHarness launches testproc, prints its pid, installs the signal handler and waits.
func runHarness(logPath string) {
	ctx := context.Background()
	stop := engine.StopAllOnSignal(ctx)
	defer stop()
	inst, err := engine.Launch(ctx, sglangAdapter(), engine.LaunchOptions{
		Config:  testConfig("ok", nil),
		LogPath: logPath, ReadyTimeout: time.Minute, StopGrace: 200 * time.Millisecond,
	})
	if err != nil {
		fmt.Println("LAUNCH FAILED:", err)
		os.Exit(3)
	}
	fmt.Printf("PGID %d\n", inst.Pid())
	select {}
}

func sglangAdapter() engine.Adapter {
	a, err := engine.AdapterFor("sglang")
	if err != nil {
		panic(err)
	}
	return a
}

// testConfig launches this test binary as a fake SGLang through the sglang adapter's command
// override (as the reference engine is launched).
func testConfig(mode string, env map[string]string) engine.LaunchConfig {
	e := map[string]string{envProc: mode}
	for k, v := range env {
		e[k] = v
	}
	return engine.LaunchConfig{Command: []string{os.Args[0]}, Model: "fake-model", Host: "127.0.0.1", Env: e}
}
