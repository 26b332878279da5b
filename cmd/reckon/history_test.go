package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/history"
	"github.com/reckon-ci/reckon/suites"
	"github.com/reckon-ci/reckon/workload"
)

// nightCommit is the synthetic commit of night i.
func nightCommit(i int) string { return fmt.Sprintf("%012x%028x", 0xc0ffee000+i, 0) }

// simulateNights writes n results.json files, one per night, made of the reference engine's
// measured trials (gate/testdata/trials/refengine-tp2-nccl: 20 trials, CV 5%): night i draws 5 of
// them (seeded, with replacement), and from night slowFrom on every throughput is multiplied by slow (latencies
// divided by it). This stands in for n nightly gates without launching any.
func simulateNights(t *testing.T, dir string, n, slowFrom int, slow float64) []string {
	t.Helper()
	files, err := filepath.Glob("../../gate/testdata/trials/refengine-tp2-nccl/*.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("trial fixtures: %v (%d files)", err, len(files))
	}
	var trials []map[string]float64
	for _, f := range files {
		r, err := workload.ImportFile(f)
		if err != nil {
			t.Fatal(err)
		}
		trials = append(trials, r.Metrics())
	}
	start := time.Date(2026, 10, 1, 2, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(40, 60))
	var out []string
	for night := 0; night < n; night++ {
		run := &gate.Run{
			Schema: gate.ResultsSchema, SpecName: "default", Engine: "refengine", TestbedKey: "cpu-2core-sim",
			Testbed: map[string]any{"gpus": 0.0}, ReckonVersion: "test", GitCommit: nightCommit(night),
			StartedAt: start.Add(time.Duration(night) * 24 * time.Hour), EngineVersion: "refengine-0.1",
		}
		run.FinishedAt = run.StartedAt.Add(20 * time.Minute)
		cfg := gate.Config{Name: "nccl", Launches: 1, Engine: map[string]any{"kv_cache_tokens": 290400.0, "kv_cache_gib": 0.14, "allreduce": "nccl"}}
		for k := 0; k < 5; k++ {
			src := trials[rng.IntN(len(trials))]
			m := map[string]float64{}
			for key, v := range src {
				switch {
				case night >= slowFrom && strings.HasSuffix(key, "_throughput"):
					v *= slow
				case night >= slowFrom && strings.HasSuffix(key, "_ms"):
					v /= slow
				}
				m[key] = v
			}
			cfg.Trials = append(cfg.Trials, gate.Trial{Workload: "c8", Index: k, Metrics: m})
		}
		run.Configs = []gate.Config{cfg}
		run.Checks = []gate.Check{{Verdict: gate.Verdict{Name: "launch nccl", Kind: gate.KindHealth, Config: "nccl", Outcome: "pass"}, Status: gate.StatusPassed}}
		p := filepath.Join(dir, fmt.Sprintf("night%02d.json", night))
		var b bytes.Buffer
		if err := gate.WriteResults(&b, run); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func historyCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return execCmd(t, newHistoryCmd(), args...)
}

// TestHistorySimulated60Nights is the 60-night history of the issue, synthesised from measured
// trial files with an 8% slowdown from night 40 (no gate is launched): analyze must find night 40
// with the commit range night39..night40, and the trend page must show it. With
// RECKON_HISTORY_DEMO_OUT=DIR the page is also written there (docs/history.md).
func TestHistorySimulated60Nights(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "history.db")
	files := simulateNights(t, dir, 60, 40, 0.92)
	// Night 0..38 first: the window a gate on night 39 would judge against.
	out, errs, code := historyCLI(t, append([]string{"add", "--history", db}, files[:39]...)...)
	if code != 0 || !strings.Contains(out, "39 of 39 runs appended") {
		t.Fatalf("add: %d\n%s\n%s", code, out, errs)
	}
	src := &historySource{dsn: db}
	defer src.close()
	q := suites.HistoryQuery{Testbed: "cpu-2core-sim", Spec: "default", Config: "nccl", Workload: "c8", Metric: "output_throughput", MinRuns: 5}
	w, err := src.Window(context.Background(), q)
	if err != nil || w.Runs != 39 || len(w.Samples) != 39*5 || w.LastCommit != nightCommit(38) {
		t.Fatalf("window before the slowdown: %+v, %v", w, err)
	}
	out, errs, code = historyCLI(t, append([]string{"add", "--history", db}, files...)...)
	if code != 0 || !strings.Contains(out, "21 of 60 runs appended") {
		t.Fatalf("add again: %d\n%s\n%s", code, out, errs)
	}
	out, errs, code = historyCLI(t, "analyze", "--history", db, "--metric", "output_throughput", "--json")
	if code != 0 {
		t.Fatalf("analyze: %d %s", code, errs)
	}
	var res struct {
		Series       int `json:"series"`
		ChangePoints []struct {
			Index      int     `json:"index"`
			Commit     string  `json:"commit"`
			PrevCommit string  `json:"prev_commit"`
			Forward    float64 `json:"forward_change"`
			PValue     float64 `json:"p_value"`
			Regression bool    `json:"regression"`
		} `json:"change_points"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if res.Series != 1 || len(res.ChangePoints) != 1 {
		t.Fatalf("want one change point in one series, got %s", out)
	}
	cp := res.ChangePoints[0]
	if cp.Index != 40 || cp.Commit != nightCommit(40) || cp.PrevCommit != nightCommit(39) || !cp.Regression || cp.Forward > -0.05 || cp.Forward < -0.11 || cp.PValue > 0.001 {
		t.Fatalf("change point %+v, want night 40 (%s..%s), about -8%%", cp, nightCommit(39)[:12], nightCommit(40)[:12])
	}
	// The gate on night 60: the 8% drop is an open regression (the nightly detector's replay), so
	// the reference is the 40 runs before it and the 20 since are tested against them: it never
	// becomes the new normal by itself.
	w, err = src.Window(context.Background(), q)
	if err != nil || w.Runs != 40 || w.OpenFrom != 40 || len(w.Groups) != 60 || !strings.HasPrefix(w.Open, "2026-11-10 ("+nightCommit(39)[:12]+".."+nightCommit(40)[:12]+")") {
		t.Fatalf("window after the drop: runs %d, open from %d of %d, open %q, %v", w.Runs, w.OpenFrom, len(w.Groups), w.Open, err)
	}
	// Accepted (reckon history accept): the 20 runs since are the reference, nothing is open.
	_, errs, code = historyCLI(t, "accept", "--history", db, "--config", "nccl", "--from", nightCommit(40)[:12])
	if code != 2 || !strings.Contains(errs, "--reason is required") {
		t.Fatalf("accept without a reason: %d %s", code, errs)
	}
	_, errs, code = historyCLI(t, "accept", "--history", db, "--config", "nccl", "--from", "cafe0000", "--reason", "x")
	if code != 2 || !strings.Contains(errs, "no run of a commit starting so") {
		t.Fatalf("accept an unknown commit: %d %s", code, errs)
	}
	out, errs, code = historyCLI(t, "accept", "--history", db, "--config", "nccl", "--from", nightCommit(40)[:12], "--reason", "slower but correct")
	if code != 0 || !strings.Contains(out, "accepted: series */*/nccl/*/* from 2026-11-10") {
		t.Fatalf("accept: %d %s %s", code, out, errs)
	}
	w, err = src.Window(context.Background(), q)
	if err != nil || w.Runs != 20 || w.Open != "" || !strings.Contains(w.Describe, "since the change accepted from 2026-11-10 (slower but correct)") {
		t.Fatalf("window after accepting: %+v, %v", w, err)
	}
	// Text output and the other series: the engine's KV tokens did not move.
	out, _, code = historyCLI(t, "analyze", "--history", db)
	if code != 0 || !strings.Contains(out, "nccl output_throughput: change point regression at run 2026-11-10 ("+nightCommit(39)[:12]+".."+nightCommit(40)[:12]+"), -") ||
		strings.Contains(out, "kv_cache_tokens: change") {
		t.Fatalf("analyze text:\n%s", out)
	}
	rep := filepath.Join(dir, "report")
	if demo := os.Getenv("RECKON_HISTORY_DEMO_OUT"); demo != "" {
		rep = demo
	}
	out, errs, code = historyCLI(t, "report", "--history", db, "--out", rep, "--workload", "c8")
	if code != 0 {
		t.Fatalf("report: %d %s %s", code, out, errs)
	}
	page, err := os.ReadFile(filepath.Join(rep, "history.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"change point regression at run 2026-11-10", "stroke-dasharray=\"5 3\"", "latest run (tonight)", "commit " + nightCommit(59)[:12]} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("history.html lacks %q", want)
		}
	}
	md, _ := os.ReadFile(filepath.Join(rep, "history.md"))
	if !strings.Contains(string(md), `nccl output\_throughput: change point regression at run 2026-11-10`) { // Markdown escaped
		t.Errorf("history.md:\n%s", md)
	}
	out, _, code = historyCLI(t, "between", "--history", db, nightCommit(38)[:14], nightCommit(42)[:14], "--metric", "output_throughput")
	if code != 0 || !strings.Contains(out, "5 run(s), 1 change point(s)") || !strings.Contains(out, "change: nccl output_throughput") {
		t.Fatalf("between:\n%s", out)
	}
	_, errs, code = historyCLI(t, "between", "--history", db, "deadbeef", nightCommit(42))
	if code != 2 || !strings.Contains(errs, "no run of commit deadbeef") {
		t.Fatalf("between an unknown commit: %d %s", code, errs)
	}
}

func TestHistoryAddImportedFiles(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "h.db")
	files := writeVLLMTrials(t, dir, 3, 1000, 50, 1)
	_, errs, code := historyCLI(t, append([]string{"add", "--history", db}, files...)...)
	if code != 2 || !strings.Contains(errs, "--testbed") || !strings.Contains(errs, "--spec") {
		t.Fatalf("missing provenance: %d %s", code, errs)
	}
	args := append([]string{"add", "--history", db, "--testbed", "h100x8", "--spec", "archive", "--config", "nccl", "--workload", "c16",
		"--commit", "abc123", "--time", "2026-11-01"}, files...)
	out, errs, code := historyCLI(t, args...)
	if code != 0 || !strings.Contains(out, "3 of 3 runs appended") {
		t.Fatalf("add: %d %s %s", code, out, errs)
	}
	out, _, code = historyCLI(t, "analyze", "--history", db, "--json", "--metric", "output_throughput")
	if code != 0 || !strings.Contains(out, `"series": 1`) {
		t.Fatalf("analyze: %s", out)
	}
}

func TestHistoryBadInputAndUnreachable(t *testing.T) {
	t.Setenv("RECKON_HISTORY", "")
	_, errs, code := historyCLI(t, "analyze")
	if code != 2 || !strings.Contains(errs, "RECKON_HISTORY") {
		t.Fatalf("no DSN: %d %s", code, errs)
	}
	_, errs, code = historyCLI(t, "analyze", "--history", "mysql://x/y")
	if code != 2 || !strings.Contains(errs, `unknown scheme "mysql"`) {
		t.Fatalf("bad DSN: %d %s", code, errs)
	}
	_, errs, code = historyCLI(t, "analyze", "--history", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if code != 3 || !strings.Contains(errs, "history store unavailable") {
		t.Fatalf("unreachable: %d %s", code, errs)
	}
	_, errs, code = historyCLI(t, "analyze", "--history", filepath.Join(t.TempDir(), "h.db"), "--p-value", "2")
	if code != 2 || !strings.Contains(errs, "--p-value 2") {
		t.Fatalf("bad p: %d %s", code, errs)
	}
}

// TestGateHistoryHookUnreachable: the gate's history hook with a store that cannot be reached
// is an infrastructure error (exit 3) that says how to append the run later; the run's files are
// not touched.
func TestGateHistoryHookUnreachable(t *testing.T) {
	dir := t.TempDir()
	files := simulateNights(t, dir, 1, 99, 1)
	run, err := gate.ReadResults(files[0])
	if err != nil {
		t.Fatal(err)
	}
	cmd := &cobra.Command{}
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	herr := appendToHistory(ctx, cmd, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", run, suites.Options{OutDir: dir})
	var ee *exitError
	if herr == nil || !asExit(herr, &ee) || ee.code != 3 {
		t.Fatalf("hook error %v, want exit 3", herr)
	}
	if !strings.Contains(errb.String(), "INFRASTRUCTURE ERROR") || !strings.Contains(errb.String(), "reckon history add "+filepath.Join(dir, "results.json")) {
		t.Fatalf("stderr:\n%s", errb.String())
	}
	if _, err := os.Stat(files[0]); err != nil {
		t.Fatal(err)
	}
	// A reachable store: appended, then already there.
	db := filepath.Join(dir, "h.db")
	for _, want := range []string{"appended run 1", "already in"} {
		out.Reset()
		if err := appendToHistory(ctx, cmd, db, run, suites.Options{OutDir: dir}); err != nil || !strings.Contains(out.String(), want) {
			t.Fatalf("hook: %v %q, want %q", err, out.String(), want)
		}
	}
}

// TestGateHistoryReadOnly: with --history-readonly a run is judged with the store and never
// appended to it; without it the same run is appended.
func TestGateHistoryReadOnly(t *testing.T) {
	dir := t.TempDir()
	files := simulateNights(t, dir, 1, 99, 1)
	run, err := gate.ReadResults(files[0])
	if err != nil {
		t.Fatal(err)
	}
	cmd := &cobra.Command{}
	var out bytes.Buffer
	cmd.SetOut(&out)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db := filepath.Join(dir, "h.db")
	runs := func() int {
		t.Helper()
		st, err := history.Open(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rs, err := st.Runs(ctx, history.RunFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	if err := recordInHistory(ctx, cmd, db, true, run, suites.Options{OutDir: dir}); err != nil || !strings.Contains(out.String(), "not appended") {
		t.Fatalf("read only: %v %q", err, out.String())
	}
	if n := runs(); n != 0 {
		t.Fatalf("a read-only run was appended: %d runs", n)
	}
	out.Reset()
	if err := recordInHistory(ctx, cmd, db, false, run, suites.Options{OutDir: dir}); err != nil || !strings.Contains(out.String(), "appended run 1") {
		t.Fatalf("append: %v %q", err, out.String())
	}
	if n := runs(); n != 1 {
		t.Fatalf("%d runs after the append, want 1", n)
	}
}

func asExit(err error, target **exitError) bool {
	e, ok := err.(*exitError)
	if ok {
		*target = e
	}
	return ok
}
