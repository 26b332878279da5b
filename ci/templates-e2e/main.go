// Command templates-e2e executes the CI templates for an engine's own repository (ci/engine/)
// end to end against a fixture engine repository, as docs/ci.md tells an engine team to set them
// up, and writes out/templates-e2e/summary.json: {"rows": [{"template", "scenario", "expected",
// "got"}]}. It exits 1 when any row's got differs from its expected. `make templates-e2e` runs it.
//
// The fixture (fixture.go) is a git repository whose engine is the reference engine, built from
// source by the repository's build script; main and one PR branch per scenario (healthy, slow,
// numerics, loosened-spec, malicious-build: a build that rewrites the job's .git and leaves a
// process that swaps reckon and the spec), each with GitHub's refs/pull/N/merge. reckon is installed by the
// templates' own install step from a local release built exactly as .goreleaser.yaml names and
// packs it (RECKON_RELEASE_URL points at it; the workflow's RECKON_SHA256 is set to its checksum,
// as a user copies it from checksums.txt). Checkouts clone the fixture's origin at the ref the
// step names; nothing else is replaced.
//
// Templates run: GitHub Actions (reckon-calibrate.yml once; reckon-premerge.yml per scenario;
// reckon-nightly.yml three nights: shards, merge, history appended, trend page, nights 1-2
// bootstrap), GitLab CI (reckon.gitlab-ci.yml as a calibration schedule, as a merge request
// pipeline per scenario and as a scheduled pipeline three times, gitlab.go), Buildkite
// (pipeline.yml likewise, buildkite.go) and Kubernetes (reckon-shards.yaml's shard and merge Jobs
// three nights, k8s.go). TEMPLATES_E2E_ONLY picks templates, TEMPLATES_E2E_SCENARIOS scenarios
// (calibrate, the pre-merge scenarios by name, nightly). Two
// controls show the rows can fail: the pre-merge template with the spec read from the PR's tree
// passes the loosened-spec PR, and a wrong pinned checksum stops the install. A row is red only
// when the gate (or merge) exits 1 with reckon's FAIL line; "refused" when a template stopped
// because its trusted tree or reckon changed since it was fetched; exit 3 for any other reason or
// any other failed step is "error".
package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/history"
)

// e2eVersion is the release the templates pin (RECKON_VERSION).
const e2eVersion = "v0.1.0"

type row struct {
	Template string `json:"template"`
	Scenario string `json:"scenario"`
	Expected string `json:"expected"`
	Got      string `json:"got"`
	Detail   string `json:"detail,omitempty"`
	Seconds  int    `json:"seconds"`
}

func command(dir string, env []string, name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.Dir = dir
	if env != nil {
		c.Env = env
	}
	return c
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "templates-e2e:", err)
		os.Exit(2)
	}
}

func run() error {
	start := time.Now()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	out := filepath.Join(root, "out", "templates-e2e")
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(out, "log.txt"))
	if err != nil {
		return err
	}
	defer logf.Close()

	// 1. The release the templates install.
	sum, err := buildRelease(root, filepath.Join(out, "release", e2eVersion))
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	baseEnv := append(os.Environ(),
		"RECKON_RELEASE_URL=file://"+filepath.Join(out, "release"),
		"RECKON_GPU_LOCK="+filepath.Join(out, "gpu.lock"),
		"GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com", "GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com",
	)

	// 2. The fixture engine repository, and its baselines recorded as docs/ci.md step 4 says.
	origin := filepath.Join(out, "origin.git")
	work := filepath.Join(out, "engine")
	if _, err := sh("", baseEnv, "git", "init", "-q", "--bare", "-b", "main", origin); err != nil {
		return err
	}
	if _, err := sh("", baseEnv, "git", "init", "-q", "-b", "main", work); err != nil {
		return err
	}
	if err := writeFixture(root, work); err != nil {
		return err
	}
	if err := commitAll(work, baseEnv, "engine with reckon's nightly and pre-merge gate"); err != nil {
		return err
	}
	if err := recordBaselines(work, baseEnv, logf); err != nil {
		return fmt.Errorf("baselines: %w", err)
	}
	if _, err := sh(work, baseEnv, "git", "remote", "add", "origin", origin); err != nil {
		return err
	}
	if _, err := sh(work, baseEnv, "git", "push", "-q", "origin", "main"); err != nil {
		return err
	}
	mainSHA, _ := sh(work, baseEnv, "git", "rev-parse", "main")

	var rows []row
	add := func(r row, t0 time.Time) {
		r.Seconds = int(time.Since(t0).Seconds())
		rows = append(rows, r)
		fmt.Printf("%-40s %-16s expected %-6s got %s %s\n", r.Template, r.Scenario, r.Expected, r.Got, r.Detail)
	}

	// 3. Pre-merge: one PR per scenario, the workflow's gate job as GitHub runs it.
	// TEMPLATES_E2E_ONLY=github,gitlab,buildkite,k8s (comma-separated) runs only those
	// templates' rows (the default: all).
	only := func(t string) bool {
		o := os.Getenv("TEMPLATES_E2E_ONLY")
		return o == "" || strings.Contains(","+o+",", ","+t+",")
	}
	// TEMPLATES_E2E_SCENARIOS=malicious-build,nightly (comma-separated) runs only those
	// scenarios' rows (the pre-merge scenarios by name; "nightly" for the nightly rows).
	scenarioOn := func(s string) bool {
		o := os.Getenv("TEMPLATES_E2E_SCENARIOS")
		return o == "" || strings.Contains(","+o+",", ","+s+",")
	}
	// The pre-merge calibration (reckon-calibrate.yml: the A/A run of main, appended to the
	// history branch), before the pull requests, whose gates then read it.
	if only("github") && scenarioOn("calibrate") {
		t0 := time.Now()
		wf, err := loadWorkflow(filepath.Join(root, "ci/engine/github/reckon-calibrate.yml"))
		if err != nil {
			return err
		}
		pin(wf, "", sum)
		got, detail, err := calibrateRun(wf, origin, filepath.Join(out, "ws", "calibrate"), baseEnv, logf, mainSHA)
		if err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
		if got == "green" {
			runs, page, err := historyState(origin, filepath.Join(out, "ws", "history-calibrate"), baseEnv, "premerge")
			switch {
			case err != nil:
				got, detail = "error", err.Error()
			case runs != 1 || !page:
				got, detail = "error", fmt.Sprintf("history branch holds %d runs of premerge after the calibration, trend page %v", runs, page)
			default:
				detail = "history: 1 run of premerge on branch reckon-history (what the PR gates read)"
			}
		}
		add(row{Template: "github-calibrate", Scenario: "calibrate (A/A of main, appended)", Expected: "green", Got: got, Detail: detail}, t0)
	}
	premerge := filepath.Join(root, "ci/engine/github/reckon-premerge.yml")
	var prs []pr
	for i, sc := range scenarios {
		t0 := time.Now()
		n := 10 + i
		head, merge, err := openPR(work, baseEnv, n, sc)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		mb, _ := sh(work, baseEnv, "git", "merge-base", "main", head)
		if !scenarioOn(sc.name) {
			continue
		}
		prs = append(prs, pr{n: n, sc: sc, head: head, merge: merge, mergeBase: mb})
		if !only("github") {
			continue
		}
		wf, err := loadWorkflow(premerge)
		if err != nil {
			return err
		}
		pin(wf, "gate", sum)
		got, detail, err := premergeJob(wf, origin, filepath.Join(out, "ws", "premerge-"+sc.name), baseEnv, logf, n, mainSHA, head, merge)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		add(row{Template: "github-premerge", Scenario: sc.name, Expected: sc.expect("github"), Got: got, Detail: detail + attackLog(detail, filepath.Join(out, "ws", "premerge-"+sc.name))}, t0)
		if sc.name == "loosened-spec" {
			// Control: the same template reading the spec from the PR's tree lets the PR pass.
			t0 = time.Now()
			wf, _ := loadWorkflow(premerge)
			pin(wf, "gate", sum)
			for k, s := range wf.Jobs["gate"].Steps {
				wf.Jobs["gate"].Steps[k].Run = strings.ReplaceAll(s.Run, "--spec trusted/.reckon/premerge.yaml", "--spec pr/.reckon/premerge.yaml")
			}
			got, detail, err := premergeJob(wf, origin, filepath.Join(out, "ws", "premerge-untrusted"), baseEnv, logf, n, mainSHA, head, merge)
			if err != nil {
				return err
			}
			add(row{Template: "github-premerge (control: spec from pr/)", Scenario: sc.name, Expected: "green", Got: got, Detail: detail}, t0)
		}
	}
	// Control: a pinned checksum that is not the release's stops the install (exit 3).
	if only("github") && scenarioOn("healthy") {
		t0 := time.Now()
		wf, _ := loadWorkflow(premerge)
		pin(wf, "gate", strings.Repeat("0", 64))
		got, detail, err := premergeJob(wf, origin, filepath.Join(out, "ws", "premerge-badsum"), baseEnv, logf, 10, mainSHA, mainSHA, mainSHA)
		if err != nil {
			return err
		}
		if strings.Contains(detail, "Install reckon") && strings.Contains(detail, "exit 3") {
			got = "refused"
		}
		add(row{Template: "github-premerge (control: wrong RECKON_SHA256)", Scenario: "healthy", Expected: "refused", Got: got, Detail: detail}, t0)
	}

	// 4. The nightly, twice: shards, merge, history appended, trend page.
	nightly := filepath.Join(root, "ci/engine/github/reckon-nightly.yml")
	for night := 1; night <= nights && only("github") && scenarioOn("nightly"); night++ {
		t0 := time.Now()
		wf, err := loadWorkflow(nightly)
		if err != nil {
			return err
		}
		pin(wf, "", sum)
		got, detail, err := nightlyRun(wf, origin, filepath.Join(out, "ws", fmt.Sprintf("nightly-%d", night)), baseEnv, logf, night, mainSHA)
		if err != nil {
			return fmt.Errorf("nightly %d: %w", night, err)
		}
		if got == "green" {
			runs, page, err := historyState(origin, filepath.Join(out, "ws", fmt.Sprintf("history-%d", night)), baseEnv, "nightly")
			switch {
			case err != nil:
				got, detail = "error", err.Error()
			case runs != night || !page:
				got, detail = "error", fmt.Sprintf("history branch holds %d runs after night %d, trend page %v", runs, night, page)
			default:
				detail = fmt.Sprintf("history: %d runs on branch reckon-history, trend page docs/index.html", runs)
			}
		}
		add(row{Template: "github-nightly", Scenario: fmt.Sprintf("night-%d (shards, merge, history, trend)", night), Expected: "green", Got: got, Detail: detail}, t0)
	}

	// 5. GitLab, Buildkite and Kubernetes: the same scenarios where the template has the job.
	e := &e2e{root: root, out: out, origin: origin, env: baseEnv, log: logf, sum: sum, mainSHA: mainSHA, add: add, nightly: scenarioOn("nightly"), calibrate: scenarioOn("calibrate")}
	for _, t := range []struct {
		name string
		run  func() error
	}{{"gitlab", func() error { return e.gitlab(prs) }}, {"buildkite", func() error { return e.buildkite(prs) }}, {"k8s", e.k8s}} {
		if only(t.name) {
			if err := t.run(); err != nil {
				return err
			}
		}
	}

	mismatch := 0
	for _, r := range rows {
		if r.Got != r.Expected {
			mismatch++
		}
	}
	b, _ := json.MarshalIndent(map[string]any{"rows": rows, "wall_seconds": int(time.Since(start).Seconds()),
		"cpus": runtime.NumCPU()}, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "summary.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("templates-e2e: %d rows, %d mismatches, %s (log: %s)\n", len(rows), mismatch, time.Since(start).Round(time.Second), logf.Name())
	if mismatch > 0 {
		os.Exit(1)
	}
	return nil
}

// pin sets RECKON_SHA256 where the workflow pins it (the workflow env, or job's).
func pin(wf *ghWorkflow, job, sum string) {
	if job != "" && wf.Jobs[job].Env["RECKON_SHA256"] != "" {
		wf.Jobs[job].Env["RECKON_SHA256"] = sum
	}
	if wf.Env["RECKON_SHA256"] != "" {
		wf.Env["RECKON_SHA256"] = sum
	}
}

func commitAll(dir string, env []string, msg string) error {
	if _, err := sh(dir, env, "git", "add", "-A"); err != nil {
		return err
	}
	_, err := sh(dir, env, "git", "commit", "-q", "-m", msg)
	return err
}

// recordBaselines does docs/ci.md step 4 on the fixture: build, run the nightly spec, record.
func recordBaselines(work string, env []string, log io.Writer) error {
	if out, err := sh(work, env, "./build.sh", "engines/main"); err != nil {
		return fmt.Errorf("%s", out)
	}
	rk := filepath.Join(filepath.Dir(work), "release", e2eVersion, "reckon")
	out, err := sh(work, env, rk, "gate", "--spec", ".reckon/nightly.yaml", "--out", "out", "--quiet")
	fmt.Fprintln(log, out)
	if err != nil {
		return err
	}
	if out, err := sh(work, env, rk, "baseline", "record", "--from", "out/results.json", "--baselines", ".reckon/baselines"); err != nil {
		return fmt.Errorf("%s", out)
	}
	return commitAll(work, env, "reckon: baselines of this testbed")
}

// openPR pushes the scenario's branch and GitHub's merge ref refs/pull/N/merge (the PR merged
// into main, main first parent); it returns the head and merge commits.
func openPR(work string, env []string, n int, sc scenario) (string, string, error) {
	br := "pr-" + sc.name
	steps := [][]string{{"git", "checkout", "-q", "-b", br, "main"}}
	for _, s := range steps {
		if _, err := sh(work, env, s[0], s[1:]...); err != nil {
			return "", "", err
		}
	}
	if err := sc.edit(work); err != nil {
		return "", "", err
	}
	if err := commitAll(work, env, "PR: "+sc.name); err != nil {
		return "", "", err
	}
	head, _ := sh(work, env, "git", "rev-parse", "HEAD")
	for _, s := range [][]string{
		{"git", "checkout", "-q", "--detach", "main"},
		{"git", "merge", "-q", "--no-ff", "-m", fmt.Sprintf("Merge %s into main", head), br},
	} {
		if _, err := sh(work, env, s[0], s[1:]...); err != nil {
			return "", "", err
		}
	}
	merge, _ := sh(work, env, "git", "rev-parse", "HEAD")
	for _, s := range [][]string{
		{"git", "push", "-q", "origin", br + ":refs/heads/" + br, fmt.Sprintf("HEAD:refs/pull/%d/merge", n), fmt.Sprintf("%s:refs/pull/%d/head", br, n),
			fmt.Sprintf("%s:refs/merge-requests/%d/head", br, n)},
		{"git", "checkout", "-q", "main"},
	} {
		if _, err := sh(work, env, s[0], s[1:]...); err != nil {
			return "", "", err
		}
	}
	return head, merge, nil
}

// premergeJob runs the pre-merge workflow's gate job for PR n and returns its verdict: green
// (every step passed), red (the gate step exited 1 and nothing before it failed), or error.
func premergeJob(wf *ghWorkflow, origin, ws string, env []string, log *os.File, n int, base, head, merge string) (string, string, error) {
	fmt.Fprintf(log, "=== premerge PR #%d in %s\n", n, ws)
	r := &ghRun{origin: origin, workspace: ws, artifacts: ws + ".artifacts", log: log, baseEnv: append([]string{}, env...), ctx: map[string]string{
		"github.event.pull_request.number": fmt.Sprint(n), "github.event.pull_request.base.sha": base,
		"github.event.pull_request.head.sha": head, "github.sha": merge, "github.ref": fmt.Sprintf("refs/pull/%d/merge", n),
		"github.run_id": fmt.Sprint(5000 + n), "github.run_attempt": "1", "github.repository": "fixture/engine", "github.event_name": "pull_request",
		"github.token": "ghs_e2e",
	}}
	res, err := r.runJob(wf, "gate")
	if err != nil {
		return "", "", err
	}
	return verdict(wf.Jobs["gate"], res)
}

// verdict reads a job's step results: the gate (or merge) step is the one that runs reckon gate
// or reckon merge.
func verdict(j *ghJob, res []stepResult) (string, string, error) {
	gateStep := map[string]bool{}
	for _, s := range j.Steps {
		if runsReckon(s.Run) {
			gateStep[s.Name] = true
		}
	}
	for _, s := range res {
		if s.Exit != 0 && s.Refused {
			return "refused", fmt.Sprintf("%q exit %d: the trusted tree or reckon changed since it was fetched", s.Name, s.Exit), nil
		}
	}
	for _, s := range res {
		if s.Exit == 0 {
			continue
		}
		if gateStep[s.Name] && s.Exit == 1 {
			return "red", fmt.Sprintf("%q exit 1", s.Name), nil
		}
		return "error", fmt.Sprintf("%q exit %d", s.Name, s.Exit), nil
	}
	return "green", "", nil
}

// nightlyRun runs the nightly's matrix of shards, then its merge job, in fresh workspaces.
func nightlyRun(wf *ghWorkflow, origin, ws string, env []string, log *os.File, night int, sha string) (string, string, error) {
	artifacts := ws + ".artifacts"
	ctx := func(extra map[string]string) map[string]string {
		m := map[string]string{"github.sha": sha, "github.ref": "refs/heads/main", "github.run_id": fmt.Sprint(9000 + night),
			"github.run_attempt": "1", "github.repository": "fixture/engine", "github.event_name": "schedule",
			"github.token": "ghs_e2e", "inputs.bootstrap": bootstrapInput(night)}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	var details []string
	for _, shard := range wf.Jobs["gate"].Strategy.Matrix["shard"] {
		s := fmt.Sprint(shard)
		fmt.Fprintf(log, "=== nightly %d shard %s\n", night, s)
		r := &ghRun{origin: origin, workspace: filepath.Join(ws, "shard-"+s), artifacts: artifacts, log: log, baseEnv: append([]string{}, env...), ctx: ctx(map[string]string{"matrix.shard": s})}
		res, err := r.runJob(wf, "gate")
		if err != nil {
			return "", "", err
		}
		got, d, _ := verdict(wf.Jobs["gate"], res)
		if got != "green" {
			details = append(details, "shard "+s+": "+got+" "+d)
		}
	}
	fmt.Fprintf(log, "=== nightly %d merge\n", night)
	r := &ghRun{origin: origin, workspace: filepath.Join(ws, "merge"), artifacts: artifacts, log: log, baseEnv: append([]string{}, env...), ctx: ctx(nil)}
	res, err := r.runJob(wf, "merge")
	if err != nil {
		return "", "", err
	}
	got, d, _ := verdict(wf.Jobs["merge"], res)
	if got == "green" && len(details) > 0 {
		got = "error"
	}
	return got, strings.TrimSpace(strings.Join(append(details, d), "; ")), nil
}

// calibrateRun runs the calibration workflow's gate job, then its append job.
func calibrateRun(wf *ghWorkflow, origin, ws string, env []string, log *os.File, sha string) (string, string, error) {
	artifacts := ws + ".artifacts"
	ctx := map[string]string{"github.sha": sha, "github.ref": "refs/heads/main", "github.run_id": "9500",
		"github.run_attempt": "1", "github.repository": "fixture/engine", "github.event_name": "workflow_dispatch", "github.token": "ghs_e2e"}
	var details []string
	for _, job := range []string{"gate", "append"} {
		fmt.Fprintf(log, "=== calibrate %s\n", job)
		c := map[string]string{}
		for k, v := range ctx {
			c[k] = v
		}
		r := &ghRun{origin: origin, workspace: filepath.Join(ws, job), artifacts: artifacts, log: log, baseEnv: append([]string{}, env...), ctx: c}
		res, err := r.runJob(wf, job)
		if err != nil {
			return "", "", err
		}
		if got, d, _ := verdict(wf.Jobs[job], res); got != "green" {
			details = append(details, job+": "+got+" "+d)
		}
	}
	if len(details) > 0 {
		return "error", strings.Join(details, "; "), nil
	}
	return "green", "", nil
}

// historyState reads the history branch as a later night (or a reader) would: the runs of spec
// stored there, and whether the trend page is.
func historyState(origin, dir string, env []string, spec string) (int, bool, error) {
	if out, err := sh("", env, "git", "clone", "-q", "--branch", "reckon-history", origin, dir); err != nil {
		return 0, false, fmt.Errorf("%s", out)
	}
	_, perr := os.Stat(filepath.Join(dir, "docs", "index.html"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := history.Open(ctx, filepath.Join(dir, "history.db"))
	if err != nil {
		return 0, false, err
	}
	defer st.Close()
	runs, err := st.Runs(ctx, history.RunFilter{Spec: spec})
	return len(runs), perr == nil, err
}

// buildRelease builds reckon for linux/<this arch> as .goreleaser.yaml does (flags, ldflags,
// archive name and contents, checksums.txt) and returns the archive's sha256.
func buildRelease(root, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	commit, _ := sh(root, nil, "git", "rev-parse", "HEAD")
	bin := filepath.Join(dir, "reckon")
	ld := fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s -X main.date=%s", e2eVersion, commit, "2026-01-01T00:00:00Z")
	c := command(root, append(os.Environ(), "CGO_ENABLED=0"), "go", "build", "-trimpath", "-ldflags", ld, "-o", bin, "./cmd/reckon")
	if out, err := c.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	name := fmt.Sprintf("reckon_%s_linux_%s.tar.gz", strings.TrimPrefix(e2eVersion, "v"), runtime.GOARCH)
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(f, h))
	tw := tar.NewWriter(gz)
	for _, p := range []string{bin, filepath.Join(root, "README.md"), filepath.Join(root, "docs/ci.md")} {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		st, _ := os.Stat(p)
		hdr := &tar.Header{Name: filepath.Base(p), Mode: int64(st.Mode().Perm()), Size: int64(len(b)), ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return "", err
		}
		if _, err := tw.Write(b); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	return sum, os.WriteFile(filepath.Join(dir, "checksums.txt"), []byte(sum+"  "+name+"\n"), 0o644)
}
