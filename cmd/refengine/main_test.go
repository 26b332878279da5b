package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/wire"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildBinary compiles cmd/refengine once for the tests of this package.
func buildBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "refengine-test-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "refengine")
		goTool, err := exec.LookPath("go")
		if err != nil { // not on PATH: the toolchain that built this test
			goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		out, err := exec.Command(goTool, "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

var uvicorn = regexp.MustCompile(`Uvicorn running on (http://[^ ]+) `)

// TestProcessLifecycle launches the binary, waits for /health (a readiness poll on the endpoint
// and the log), serves a request, then SIGTERMs it with a long request in flight: the process
// must exit 0 and the in-flight request must end.
func TestProcessLifecycle(t *testing.T) {
	bin := buildBinary(t)
	model, _ := filepath.Abs("../../fixtures/models/tiny.json")

	// unknown flag: exit 2 with a clear message
	out, err := exec.Command(bin, "--no-such-flag").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "no-such-flag") {
		t.Errorf("unknown flag: err %v, output %q; want exit 2 naming the flag", err, out)
	}

	// a device too small for the model: exit 1 with SGLang's message in a traceback
	out, err = exec.Command(bin, "--model-path", model, "--device-memory", "8MiB", "--port", "0").CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "Traceback (most recent call last):") ||
		!strings.Contains(string(out), "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.") {
		t.Errorf("tiny device: err %v, output %q; want exit 1 with a traceback", err, out)
	}

	// an NCCL_ALGO the model cannot honour: exit 2 (a usage error) naming the variable
	bad := exec.Command(bin, "--model-path", model, "--port", "0", "--tp-size", "2")
	bad.Env = append(os.Environ(), "NCCL_ALGO=NVLS")
	out, err = bad.CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), `NCCL_ALGO="NVLS": algorithm NVLS is not modelled`) {
		t.Errorf("NCCL_ALGO=NVLS: err %v, output %q; want exit 2 naming NCCL_ALGO", err, tail(string(out), 300))
	}

	// --help lists the allreduce fault flags and --weight-seed
	out, _ = exec.Command(bin, "--help").CombinedOutput()
	for _, f := range []string{"-fault-allreduce-scale", "-fault-allreduce-drop-rank-above", "-fault-allreduce-stale-above", "-fault-allreduce-min-batch", "-weight-seed"} {
		if !strings.Contains(string(out), f) {
			t.Errorf("--help does not list %s", f)
		}
	}

	// port taken: exit 1 with uvicorn's "address already in use" (the launcher retries on it)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	out, err = exec.Command(bin, "--model-path", model, "--port", port).CombinedOutput()
	ln.Close()
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "address already in use") {
		t.Errorf("port taken: err %v, output %q; want exit 1 and 'address already in use'", err, tail(string(out), 300))
	}

	cmd := exec.Command(bin, "--model-path", model, "--tp-size", "2", "--port", "0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var base string
	var logText strings.Builder
	guard := time.After(60 * time.Second)
	for base == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("engine exited before listening:\n%s", logText.String())
			}
			logText.WriteString(l + "\n")
			if m := uvicorn.FindStringSubmatch(l); m != nil {
				base = m[1]
			}
		case <-guard:
			t.Fatalf("no Uvicorn line:\n%s", logText.String())
		}
	}
	// readiness: the ready line, then /health 200
	for ready := false; !ready; {
		select {
		case l := <-lines:
			logText.WriteString(l + "\n")
			ready = strings.Contains(l, "The server is fired up and ready to roll!")
		case <-guard:
			t.Fatalf("not ready:\n%s", logText.String())
		}
	}
	resp, err := http.Get(base + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health after ready: %v %v", resp, err)
	}
	resp.Body.Close()
	go func() { // keep draining the log
		for l := range lines {
			logText.WriteString(l + "\n")
		}
	}()

	body, _ := json.Marshal(map[string]any{"prompt": "in flight", "max_tokens": 3000, "temperature": 0, "ignore_eos": true, "stream": true})
	stream, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	rd := bufio.NewReader(stream.Body)
	if _, err := rd.ReadString('\n'); err != nil { // the first chunk: the request is running
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(rd)
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	select {
	case err := <-waitErr:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v (want status 0)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("engine still running 30 s after SIGTERM")
	}
	if !bytes.Contains(rest, []byte("[DONE]")) {
		t.Errorf("in-flight stream did not end cleanly: ...%q", tail(string(rest), 300))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestProbeAllreduceDispatch: `refengine probe-allreduce` reaches the probe and prints the
// contract JSON.
func TestProbeAllreduceDispatch(t *testing.T) {
	bin := buildBinary(t)
	out, err := exec.Command(bin, "probe-allreduce", "--tp", "2", "--sizes", "1KiB", "--dtype", "float32", "--inputs", "integer", "--json").Output()
	if err != nil {
		t.Fatalf("probe-allreduce: %v\n%s", err, out)
	}
	var p wire.AllReduceProbe
	if err := json.Unmarshal(out, &p); err != nil || p.Schema != wire.AllReduceProbeSchema || p.WorldSize != 2 || len(p.Results) == 0 {
		t.Errorf("probe output %s: %v", out, err)
	}
}

// TestVersionFlag: `refengine [--engine-version V] --version` and `refengine vllm [--engine-version
// V] --version` print the persona's reported version and exit 0; an unknown release exits 2.
func TestVersionFlag(t *testing.T) {
	bin := buildBinary(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--version"}, "0.0.0.dev1+grefengine"},
		{[]string{"--engine-version", "0.3", "--version"}, "0.3.6"},
		{[]string{"vllm", "--engine-version", "0.12", "--version"}, "0.12.0"},
		{[]string{"vllm", "--version"}, "0.22.1"},
	} {
		out, err := exec.Command(bin, c.args...).Output()
		if err != nil || string(out) != c.want+"\n" {
			t.Errorf("refengine %q: %q %v, want %q", c.args, out, err, c.want)
		}
	}
	err := exec.Command(bin, "--engine-version", "9", "--version").Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("unknown release: %v, want exit 2", err)
	}
}

// BenchmarkStartToReady measures a process's time from exec to "The server is fired up and ready
// to roll!" (tp 4, default model).
func BenchmarkStartToReady(b *testing.B) {
	bin := buildBinary(b)
	model, _ := filepath.Abs("../../fixtures/models/tiny.json")
	var total time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		cmd := exec.Command(bin, "--model-path", model, "--tp-size", "4", "--port", "0")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		ready := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), "The server is fired up and ready to roll!") {
				ready = true
				break
			}
		}
		total += time.Since(t0)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		go io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
		if !ready {
			b.Fatal("engine exited before it was ready")
		}
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s_to_ready")
}
