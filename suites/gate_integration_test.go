package suites_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/reporters"
)

// These tests run the real reckon binary against the real reference engine, one `reckon gate`
// process per spec (a Ginkgo suite runs once per process). Each field-failure spec must turn the
// gate red with its expected one-line reason; the default spec must pass.

var repoRoot string

func TestMain(m *testing.M) {
	wd, _ := os.Getwd()
	repoRoot = filepath.Dir(wd)
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	ld := buildLDFlags()
	for _, b := range []string{"reckon", "refengine"} {
		cmd := exec.Command("go", "build", "-ldflags", ld, "-o", filepath.Join(repoRoot, "bin", b), "./cmd/"+b)
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b, err, out)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// buildLDFlags is the -ldflags that `make build` uses (its one home is the Makefile's LDFLAGS):
// `make test` passes it in RECKON_LDFLAGS; otherwise `make -s ldflags` prints it. The tests
// rebuild bin/reckon and bin/refengine, which the user runs afterwards, so a build without it
// would leave binaries that call themselves "reckon dev".
func buildLDFlags() string {
	if ld := strings.TrimSpace(os.Getenv("RECKON_LDFLAGS")); ld != "" {
		return ld
	}
	cmd := exec.Command("make", "-s", "--no-print-directory", "ldflags")
	cmd.Dir = repoRoot
	if out, err := cmd.Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	return ""
}

type gateRun struct {
	exit    int
	stdout  string
	stderr  string
	out     string
	results *gate.Run
	junit   junitSuites
}

type junitSuites struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
	Suites   []struct {
		Name  string `xml:"name,attr"`
		Cases []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// marker is put in the environment of every reckon process a test starts; engines inherit it, so
// /proc tells whether any process of the test outlived its run.
func marker(t *testing.T) string {
	return "RECKON_TEST_MARKER=" + strings.ReplaceAll(t.Name(), "/", "_") + strconv.Itoa(os.Getpid())
}

func gateSpec(t *testing.T, specFile string, extra ...string) *gateRun {
	t.Helper()
	r := runGate(t, specFile, extra...)
	r.load(t)
	assertNoSurvivors(t)
	return r
}

// runGate runs `reckon gate` on a spec under fixtures/specs into a fresh output directory and
// returns its exit code and output, reading no reports.
func runGate(t *testing.T, specFile string, extra ...string) *gateRun {
	t.Helper()
	out := t.TempDir()
	args := append([]string{"gate", "--spec", filepath.Join("fixtures", "specs", specFile), "--out", out, "--quiet"}, extra...)
	cmd := exec.Command(filepath.Join(repoRoot, "bin", "reckon"), args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), marker(t))
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := &gateRun{stdout: so.String(), stderr: se.String(), out: out}
	if ee, ok := err.(*exec.ExitError); ok {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run reckon gate: %v", err)
	}
	return r
}

// redGate runs a spec that must turn the gate red (exit 1); integration tests skip under -short.
func redGate(t *testing.T, specFile string, extra ...string) *gateRun {
	t.Helper()
	if testing.Short() {
		t.Skip("integration")
	}
	r := gateSpec(t, specFile, extra...)
	if r.exit != 1 {
		t.Fatalf("%s: exit %d, want 1\n%s", specFile, r.exit, r.dump())
	}
	return r
}

func (r *gateRun) load(t *testing.T) {
	t.Helper()
	res, err := gate.ReadResults(filepath.Join(r.out, "results.json"))
	if err != nil {
		t.Fatalf("results.json: %v\nstdout:\n%s\nstderr:\n%s", err, r.stdout, tail(r.stderr, 60))
	}
	r.results = res
	b, err := os.ReadFile(filepath.Join(r.out, "junit.xml"))
	if err != nil {
		t.Fatalf("junit.xml: %v", err)
	}
	if err := xml.Unmarshal(b, &r.junit); err != nil {
		t.Fatalf("junit.xml does not parse: %v", err)
	}
}

func (r *gateRun) check(t *testing.T, name string) gate.Check {
	t.Helper()
	for _, c := range r.results.Checks {
		if c.Name == name {
			return c
		}
	}
	var names []string
	for _, c := range r.results.Checks {
		names = append(names, c.Name)
	}
	t.Fatalf("no check %q in results; have %q", name, names)
	return gate.Check{}
}

func (r *gateRun) dump() string {
	var b strings.Builder
	for _, c := range r.results.Checks {
		fmt.Fprintf(&b, "  [%s/%s] %s: %s\n", c.Status, c.Outcome, c.Name, c.Message)
	}
	return b.String() + "stderr tail:\n" + tail(r.stderr, 30)
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// assertNoSurvivors fails when any process started under this test's marker is still alive.
func assertNoSurvivors(t *testing.T) {
	t.Helper()
	want := []byte(marker(t))
	deadline := time.Now().Add(5 * time.Second)
	for {
		var alive []string
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err != nil || !bytes.Contains(env, want) {
				continue
			}
			stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if strings.Contains(string(stat), ") Z ") {
				continue // a zombie holds nothing
			}
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			alive = append(alive, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes outlived the run: %q", alive)
		}
		time.Sleep(100 * time.Millisecond) // polling /proc for exit; not a readiness wait
	}
}

func TestDefaultSpecPasses(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	if testing.Short() {
		t.Skip("integration")
	}
	r := gateSpec(t, "default.yaml")
	if r.exit != 0 {
		t.Fatalf("default spec: exit %d, want 0\n%s", r.exit, r.dump())
	}
	for _, c := range r.results.Configs {
		if c.Launches != 1 {
			t.Errorf("config %s launched %d times, want exactly 1", c.Name, c.Launches)
		}
	}
	if r.junit.Failures != 0 || r.junit.Errors != 0 || r.junit.Tests == 0 {
		t.Errorf("junit: tests=%d failures=%d errors=%d", r.junit.Tests, r.junit.Failures, r.junit.Errors)
	}
	if !strings.Contains(r.stdout, " passed, 0 failed") {
		t.Errorf("closing line missing: %q", tail(r.stdout, 3))
	}
}

func TestPCIeForcedCustomFails(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	r := redGate(t, "pcie-forced-custom.yaml")
	kv := r.check(t, "relative custom-ar kv_cache_tokens >= 0.9 x nccl")
	if kv.Status != gate.StatusFailed || !strings.Contains(kv.Message, "kv_cache_tokens") {
		t.Errorf("KV check: %+v", kv)
	}
	tp := r.check(t, "custom allreduce is not slower than NCCL")
	if tp.Status != gate.StatusFailed || tp.Stat == nil || tp.Stat.Outcome != "regression" || tp.Stat.Ratio > 0.85 {
		t.Errorf("throughput check: status %s stat %+v message %q", tp.Status, tp.Stat, tp.Message)
	}
	if !strings.Contains(tp.Message, "KV cache -") {
		t.Errorf("the one-line verdict does not carry the KV change: %q", tp.Message)
	}
	if ex := reporters.Explain(r.results, &tp); !strings.Contains(strings.ToLower(ex), "kv") {
		t.Errorf("explanation does not correlate the KV cache: %q", ex)
	}
	// The same junit.xml read by a third-party JUnit parser (npm junit2json), as a CI would.
	if view, ok := consumeJUnit(t, filepath.Join(r.out, "junit.xml")); ok {
		if view.Failures != r.junit.Failures || view.Tests != r.junit.Tests || view.Failures < 2 {
			t.Errorf("junit2json sees tests=%d failures=%d; reckon wrote tests=%d failures=%d", view.Tests, view.Failures, r.junit.Tests, r.junit.Failures)
		}
	}
}

type consumerView struct {
	Tests    int `json:"tests"`
	Failures int `json:"failures"`
	Errors   int `json:"errors"`
}

// consumeJUnit parses a JUnit file with the npm package junit2json (installed by .ci/run); it
// reports false (and the test carries on) where node or the package is missing, unless
// RECKON_REQUIRE_JUNIT_CONSUMER=1 says CI installed them.
func consumeJUnit(t *testing.T, path string) (consumerView, bool) {
	t.Helper()
	dir := filepath.Join(repoRoot, "reporters", "testdata", "junit-consumer")
	node, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "junit2json"))
	if err != nil || modErr != nil {
		if os.Getenv("RECKON_REQUIRE_JUNIT_CONSUMER") == "1" {
			t.Fatalf("JUnit consumer required but not installed (node: %v, junit2json: %v)", err, modErr)
		}
		t.Log("junit2json not installed; third-party JUnit check skipped")
		return consumerView{}, false
	}
	out, err := exec.Command(node, filepath.Join(dir, "consume.mjs"), path).Output()
	if err != nil {
		t.Fatalf("junit2json could not read %s: %v", path, err)
	}
	var v consumerView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("consume.mjs output: %v", err)
	}
	return v, true
}

// numerics-fault.yaml and the other allreduce faults: numerics_integration_test.go.

func TestCrashIsInfrastructureError(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	// An engine that crashes under load is infrastructure, not a regression: exit 3, and its
	// engine-log check is an error (the crash), not a failure.
	r := exitGate(t, 3, "crash.yaml")
	wantClosing(t, r, "INFRASTRUCTURE ERROR: 4 passed, 0 failed, 3 errors, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run")
	if c := r.check(t, "crashing: engine log shows no errors"); c.Status != gate.StatusError {
		t.Errorf("the crashed engine's log check: %+v", c)
	}
	var sawErr bool
	for _, c := range r.results.Checks {
		if c.Config == "crashing" && c.Status == gate.StatusError {
			sawErr = true
		}
		if c.Config == "healthy" && c.Kind == "health" && c.Status != gate.StatusPassed {
			t.Errorf("healthy config: %+v", c)
		}
	}
	if !sawErr {
		t.Errorf("no infrastructure error for the crashing config\n%s", r.dump())
	}
}

func TestStartupHangTimesOut(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	// Every check of the engine that never became ready is an error, none a pass: exit 3.
	r := exitGate(t, 3, "hang.yaml")
	wantClosing(t, r, "INFRASTRUCTURE ERROR: 4 passed, 0 failed, 4 errors, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run")
	for _, c := range r.results.Checks {
		if c.Config == "hanging" && c.Status != gate.StatusError {
			t.Errorf("a check of the engine that never started is %s: %+v", c.Status, c)
		}
	}
	h := r.check(t, "hanging: launch and readiness")
	if h.Status != gate.StatusError || !strings.Contains(h.Message, "ready") {
		t.Errorf("hanging health: %+v", h)
	}
	if ok := r.check(t, "healthy: launch and readiness"); ok.Status != gate.StatusPassed {
		t.Errorf("healthy health: %+v", ok)
	}
}

func TestSlowdownAgainstRecordedBaseline(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	if testing.Short() {
		t.Skip("integration")
	}
	healthy := gateSpec(t, "slowdown-healthy.yaml")
	base := t.TempDir()
	rec := exec.Command(filepath.Join(repoRoot, "bin", "reckon"), "baseline", "record", "--from", filepath.Join(healthy.out, "results.json"), "--dir", base)
	rec.Dir = repoRoot
	if out, err := rec.CombinedOutput(); err != nil {
		t.Fatalf("baseline record: %v\n%s", err, out)
	}
	slow := gateSpec(t, "slowdown.yaml", "--baselines", base, "--require-baseline")
	if slow.exit != 1 {
		t.Fatalf("slowdown: exit %d, want 1\n%s", slow.exit, slow.dump())
	}
	c := slow.check(t, "throughput custom-ar decode output_throughput vs baseline")
	if c.Stat == nil || c.Stat.Outcome != "regression" {
		t.Errorf("slowdown check: %+v", c)
	}
}

// A held-out style case: steps 7% slower than the base config's, judged at min_effect 3%. On the
// device clock the slowdown does not depend on the machine's load, so the verdict is red with the
// effect measured at 1/1.07 whatever else runs beside the test.
func TestSevenPercentSlowerStepsFailAtThreePercent(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	r := redGate(t, "slow-steps-7pct.yaml")
	c := r.check(t, "throughput slow decode output_throughput vs base")
	if c.Stat == nil || c.Stat.Outcome != "regression" {
		t.Fatalf("7%% slower steps: %+v", c)
	}
	if want := 1 / 1.07; math.Abs(c.Stat.Ratio-want) > 0.01 {
		t.Errorf("ratio %.4f, want %.4f (the modelled slowdown)", c.Stat.Ratio, want)
	}
}

// TestDeviceClockOverrunIsSaid: a workload that asks more of the small model's CPU than the
// modelled step allows (64 in flight at tp 8) is measured, but both the measurement and the
// throughput verdict say that the machine's CPU set the pace (the trial files keep it too).
func TestDeviceClockOverrunIsSaid(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	if testing.Short() {
		t.Skip("integration")
	}
	r := gateSpec(t, "device-clock-overrun.yaml")
	tp := r.check(t, "throughput custom-ar crowded output_throughput vs nccl")
	if !strings.Contains(tp.Message, "device clock was overrun") || !strings.Contains(tp.Details, "overran its device clock") {
		t.Errorf("throughput verdict does not say the device clock was overrun: %q\n%s", tp.Message, tp.Details)
	}
	said := 0
	for _, c := range r.results.Checks {
		if c.Kind == gate.KindMeasurement && strings.Contains(c.Message, "overran its device clock") {
			said++
		}
	}
	if said != 2 {
		t.Errorf("%d measurement checks say the device clock was overrun, want 2 (nccl, custom-ar)", said)
	}
}

func TestMemoryLeakFails(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	r := redGate(t, "memory-leak.yaml")
	c := r.check(t, "leaking: engine log shows no errors")
	if c.Status != gate.StatusFailed || !strings.Contains(c.Message, "memory leak detected") {
		t.Errorf("leak check: %+v", c)
	}
	// The failure points at the spec (the config's line), and the failed config's server state
	// was saved before its engine was stopped.
	if c.Line != 13 {
		t.Errorf("leak check line %d, want 13 (config leaking in memory-leak.yaml)", c.Line)
	}
	for _, f := range []string{"server_info.json", "metrics.txt"} {
		if b, err := os.ReadFile(filepath.Join(r.out, "artifacts", "leaking", f)); err != nil || len(b) == 0 {
			t.Errorf("artifact %s: %v", f, err)
		}
	}
}

func TestInterruptStopsEnginesAndWritesPartialReports(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	if testing.Short() {
		t.Skip("integration")
	}
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(repoRoot, "bin", "reckon"), "gate", "--spec", "fixtures/specs/default.yaml", "--out", out, "--quiet")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), marker(t))
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the first trial has been measured (results.json is checkpointed after each).
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if res, err := gate.ReadResults(filepath.Join(out, "results.json")); err == nil && len(res.Configs) > 0 && len(res.Configs[0].Trials) > 0 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no trial measured in time\n%s", tail(se.String(), 40))
		}
		time.Sleep(200 * time.Millisecond) // polling a file the run writes
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if err == nil {
		t.Fatalf("interrupted gate exited 0")
	}
	assertNoSurvivors(t)
	res, rerr := gate.ReadResults(filepath.Join(out, "results.json"))
	if rerr != nil {
		t.Fatalf("partial results.json: %v", rerr)
	}
	if !res.Interrupted {
		t.Errorf("results.json not marked interrupted")
	}
	if len(res.Configs[0].Trials) == 0 {
		t.Errorf("measured trials lost")
	}
	for _, f := range []string{"junit.xml", "summary.md", "report.html"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("partial report %s: %v", f, err)
		}
	}
}

func TestLabelFilterSkipsChecksOfConfigsNotLaunched(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	if testing.Short() {
		t.Skip("integration")
	}
	// Without --allow-partial the filter is bad input: it leaves out nccl and eagle3, which
	// selected cross-config checks compare (nothing is launched).
	bad := gateNoReports(t, "default.yaml", "--label-filter", "custom-ar && !throughput")
	if bad.exit != 2 || !strings.Contains(bad.stderr, `"equivalence custom-ar vs nccl" needs nccl: numerics probe`) || !strings.Contains(bad.stderr, "--allow-partial") {
		t.Fatalf("filter without the inputs: exit %d, want 2 naming the check and its input\n%s", bad.exit, bad.stderr)
	}
	r := gateSpec(t, "default.yaml", "--label-filter", "custom-ar && !throughput", "--allow-partial")
	if r.exit != 0 {
		t.Fatalf("filtered run: exit %d, want 0\n%s", r.exit, r.dump())
	}
	for _, c := range r.results.Configs {
		want := 0
		if c.Name == "custom-ar" {
			want = 1
		}
		if c.Launches != want {
			t.Errorf("config %s launched %d times, want %d", c.Name, c.Launches, want)
		}
	}
	eq := r.check(t, "equivalence custom-ar vs nccl")
	if eq.Status != gate.StatusSkipped || eq.Outcome != gate.OutcomePartial || !strings.Contains(eq.Message, "left out nccl: numerics probe") {
		t.Errorf("equivalence with an unlaunched base: %+v", eq)
	}
}
