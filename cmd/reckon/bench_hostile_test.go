package main

// The hostile-server matrix of `reckon bench`: every misbehaving server ends the benchmark in
// bounded time with a clear error (exit status 3), and the peak RSS of a real `reckon bench`
// process (this test binary re-executed as main) stays under 100 MB at concurrency 8 against an
// endless stream and a 1 GiB line.

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/engine/client/hostile"
)

// envRunMain makes the test binary run reckon's main with the arguments that follow "--".
const envRunMain = "RECKON_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		for k, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{"reckon"}, os.Args[k+1:]...)
				break
			}
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func benchArgs(url, result string, extra ...string) []string {
	return append([]string{"--url", url, "--result", result, "--num-prompts", "16", "--concurrency", "8",
		"--request-timeout", "2s", "--metadata-timeout", "500ms", "--quiet"}, extra...)
}

func TestBenchHostileServers(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		extra []string
		code  int
		want  string
	}{
		// Without --model, bench asks /v1/models first: the metadata timeout ends it.
		{"never-metadata", nil, 3, "GET /v1/models: no complete answer within the metadata timeout of 500ms"},
		// With --model the benchmark runs; /server_info afterwards times out and is only missing.
		{"never-metadata", []string{"--model", "m"}, 0, ""},
		{"never-completions", nil, 3, "no request succeeded (16 failed)"},
		{"endless-stream", nil, 3, "no request succeeded (16 failed)"},
		{"huge-line", nil, 3, "no request succeeded (16 failed)"},
		{"invalid-chunks", nil, 3, "no request succeeded (16 failed)"},
		{"close-mid-stream", nil, 3, "no request succeeded (16 failed)"},
		{"html-500", nil, 3, "no request succeeded (16 failed)"},
	} {
		t.Run(tc.kind+strings.Join(tc.extra, ""), func(t *testing.T) {
			srv := httptest.NewServer(hostile.Handler(tc.kind))
			defer srv.Close()
			result := filepath.Join(t.TempDir(), "r.json")
			start := time.Now()
			_, errs, code := execCmd(t, newBenchCmd(), benchArgs(srv.URL, result, tc.extra...)...)
			took := time.Since(start)
			if code != tc.code || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d with %q", code, errs, tc.code, tc.want)
			}
			// 16 requests, 8 at a time, 2 s each at most, plus metadata timeouts.
			if took > 8*time.Second {
				t.Errorf("took %s, want under 8s", took)
			}
			if tc.code == 0 || strings.Contains(tc.want, "no request succeeded") {
				b, err := os.ReadFile(result)
				if err != nil {
					t.Fatalf("no result file: %v", err)
				}
				if tc.code != 0 && !strings.Contains(string(b), `"failed": 16`) {
					t.Errorf("result does not count 16 failed requests: %.300s", b)
				}
			}
		})
	}
}

func TestBenchResultPathCheckedFirst(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// No server at this URL: the check must come before any request.
	for _, p := range []string{"/proc/x.json", filepath.Join(file, "x.json"), "/no/such/dir/x.json", t.TempDir()} {
		start := time.Now()
		_, errs, code := execCmd(t, newBenchCmd(), "--url", "http://127.0.0.1:1", "--result", p, "--quiet")
		if code != 2 || !strings.Contains(errs, "--result "+p) || time.Since(start) > time.Second {
			t.Errorf("--result %s: exit %d, %q; want exit 2 naming the path at once", p, code, errs)
		}
	}
}

// TestBenchPeakRSSHostile measures a real `reckon bench` process.
func TestBenchPeakRSSHostile(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	const timeBin = "/usr/bin/time"
	if _, err := os.Stat(timeBin); err != nil {
		t.Skipf("no %s to measure peak RSS with", timeBin)
	}
	for _, kind := range []string{"endless-stream", "huge-line"} {
		srv := httptest.NewServer(hostile.Handler(kind))
		result := filepath.Join(t.TempDir(), "r.json")
		// Through /usr/bin/time: the rusage of a child this (large) test process starts itself
		// would count the parent's memory, which the child shares until exec.
		rssFile := filepath.Join(t.TempDir(), "rss")
		args := append([]string{"-f", "%M", "-o", rssFile, os.Args[0], "--", "bench", "--log-level", "warn"}, benchArgs(srv.URL, result, "--request-timeout", "30s")...)
		cmd := exec.Command(timeBin, args...)
		cmd.Env = append(os.Environ(), envRunMain+"=1")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		srv.Close()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Errorf("%s: %v, want exit status 3; output:\n%s", kind, err, out)
		}
		b, err := os.ReadFile(rssFile)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Fields(string(b))
		kib, err := strconv.ParseFloat(lines[len(lines)-1], 64)
		if err != nil {
			t.Fatalf("/usr/bin/time wrote %q", b)
		}
		mb := kib / 1024
		t.Logf("reckon bench --concurrency 8 against %s: peak RSS %.1f MiB, %s", kind, mb, took.Round(time.Millisecond))
		if mb > 100 {
			t.Errorf("%s: peak RSS %.1f MiB, want < 100 MiB", kind, mb)
		}
	}
}
