package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/ci/k8sjobs"

	"github.com/reckon-ci/reckon/history"
)

// The GitLab, Buildkite and Kubernetes rows: the same scenarios as GitHub's where the template
// has the job (pre-merge: healthy, slow, numerics, loosened-spec; nightly: two nights of shards,
// merge, history appended, trend page).

// pr is one opened pull (merge) request of a scenario.
type pr struct {
	n                      int
	sc                     scenario
	head, merge, mergeBase string
}

type e2e struct {
	root, out, origin string
	env               []string
	log               *os.File
	sum, mainSHA      string
	add               func(row, time.Time)
	nightly           bool // the nightly rows are on (TEMPLATES_E2E_SCENARIOS)
	calibrate         bool // the calibration rows are on
}

// countRuns opens a history store and counts its runs of spec (the spec's name).
func countRuns(path, spec string) (int, error) {
	if _, err := os.Stat(path); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := history.Open(ctx, path)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	runs, err := st.Runs(ctx, history.RunFilter{Spec: spec})
	return len(runs), err
}

// historyVerdict checks a green night's history: night runs of the nightly spec in the store
// (a calibration's runs of the pre-merge spec may be there too), the trend page there.
func historyVerdict(got, detail string, night int, db, page, where string) (string, string) {
	return storeVerdict(got, detail, "nightly", night, db, page, where)
}

// storeVerdict checks that a green run left want runs of spec in the store db and the trend
// page.
func storeVerdict(got, detail, spec string, want int, db, page, where string) (string, string) {
	if got != "green" {
		return got, detail
	}
	night := want
	runs, err := countRuns(db, spec)
	_, perr := os.Stat(page)
	switch {
	case err != nil:
		return "error", fmt.Sprintf("history %s: %v", db, err)
	case runs != night || perr != nil:
		return "error", fmt.Sprintf("history holds %d runs of %s, want %d; trend page %s: %v", runs, spec, night, page, perr)
	}
	return got, fmt.Sprintf("history: %d runs of %s %s", runs, spec, where)
}

func (e *e2e) gitlab(prs []pr) error {
	api, err := startGitLabAPI()
	if err != nil {
		return err
	}
	path := filepath.Join(e.root, "ci/engine/gitlab/reckon.gitlab-ci.yml")
	g := &glRunner{origin: e.origin, baseEnv: e.env, log: e.log, api: api}
	load := func() (map[string]any, error) {
		doc, err := loadGitLab(path)
		if err != nil {
			return nil, err
		}
		if v, ok := doc["variables"].(map[string]any); ok && v["RECKON_SHA256"] != nil {
			v["RECKON_SHA256"] = e.sum
		}
		return doc, nil
	}
	if e.calibrate {
		// The pre-merge calibration: a schedule with RECKON_CALIBRATE=1, the pre-merge spec with
		// both sides built from the default branch, appended to the chained history.
		t0 := time.Now()
		doc, err := load()
		if err != nil {
			return err
		}
		run := &glPipelineRun{dir: filepath.Join(e.out, "ws", "gitlab-calibrate"), fetch: "refs/heads/main", ref: "main",
			vars: map[string]string{"CI_PIPELINE_SOURCE": "schedule", "CI_COMMIT_SHA": e.mainSHA, "CI_COMMIT_REF_NAME": "main", "CI_COMMIT_BRANCH": "main", "RECKON_CALIBRATE": "1"}}
		if err := g.runPipeline(doc, run); err != nil {
			return fmt.Errorf("gitlab calibrate: %w", err)
		}
		got, detail := pipelineVerdict(run.results())
		arts := run.jobArtifacts("reckon-merge")
		got, detail = storeVerdict(got, detail, "premerge", 1, filepath.Join(arts, "history/history.db"), filepath.Join(arts, "history/history.html"),
			"in the reckon-merge artifact history/history.db (the chain the MR pipelines read)")
		e.add(row{Template: "gitlab-calibrate", Scenario: "calibrate (A/A of main, appended)", Expected: "green", Got: got, Detail: detail}, t0)
	}
	for _, p := range prs {
		t0 := time.Now()
		doc, err := load()
		if err != nil {
			return err
		}
		run := &glPipelineRun{dir: filepath.Join(e.out, "ws", "gitlab-premerge-"+p.sc.name), fetch: fmt.Sprintf("refs/merge-requests/%d/head", p.n),
			ref: fmt.Sprintf("refs/merge-requests/%d/head", p.n), vars: map[string]string{
				"CI_PIPELINE_SOURCE": "merge_request_event", "CI_COMMIT_SHA": p.head, "CI_COMMIT_REF_NAME": "pr-" + p.sc.name,
				"CI_MERGE_REQUEST_IID": fmt.Sprint(p.n), "CI_MERGE_REQUEST_LABELS": "perf-gate",
				"CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main", "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "pr-" + p.sc.name,
				"CI_MERGE_REQUEST_DIFF_BASE_SHA": p.mergeBase, "CI_MERGE_REQUEST_EVENT_TYPE": "detached",
			}}
		if err := g.runPipeline(doc, run); err != nil {
			return fmt.Errorf("gitlab premerge %s: %w", p.sc.name, err)
		}
		got, detail := pipelineVerdict(run.results())
		if len(run.results()) == 0 {
			got, detail = "error", "the rules put no job into the merge request pipeline"
		}
		e.add(row{Template: "gitlab-premerge", Scenario: p.sc.name, Expected: p.sc.expect("gitlab"), Got: got, Detail: detail + attackLog(detail, run.dir)}, t0)
	}
	for night := 1; night <= nights && e.nightly; night++ {
		t0 := time.Now()
		doc, err := load()
		if err != nil {
			return err
		}
		run := &glPipelineRun{dir: filepath.Join(e.out, "ws", fmt.Sprintf("gitlab-nightly-%d", night)), fetch: "refs/heads/main", ref: "main",
			vars: map[string]string{"CI_PIPELINE_SOURCE": "schedule", "CI_COMMIT_SHA": e.mainSHA, "CI_COMMIT_REF_NAME": "main", "CI_COMMIT_BRANCH": "main",
				"RECKON_BOOTSTRAP": map[bool]string{true: "1", false: ""}[bootstrapNight(night)]}}
		if err := g.runPipeline(doc, run); err != nil {
			return fmt.Errorf("gitlab nightly %d: %w", night, err)
		}
		got, detail := pipelineVerdict(run.results())
		arts := run.jobArtifacts("reckon-merge")
		got, detail = historyVerdict(got, detail, night, filepath.Join(arts, "history/history.db"), filepath.Join(arts, "history/history.html"),
			"in the reckon-merge artifact history/history.db (chained through the job-token API), trend page history/history.html")
		e.add(row{Template: "gitlab-nightly", Scenario: fmt.Sprintf("night-%d (shards, merge, history, trend)", night), Expected: "green", Got: got, Detail: detail}, t0)
	}
	return nil
}

func (e *e2e) buildkite(prs []pr) error {
	path := filepath.Join(e.root, "ci/engine/buildkite/pipeline.yml")
	agentDir := filepath.Join(e.out, "ws", "buildkite-agent")
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		return err
	}
	// The agent's environment hook: the history store (a PostgreSQL DSN in production; the
	// same reckon --history accepts a SQLite path).
	k := &bkRunner{origin: e.origin, baseEnv: e.env, log: e.log, agent: map[string]string{"RECKON_HISTORY_DSN": filepath.Join(agentDir, "history.db")}}
	load := func() (map[string]string, []map[string]any, error) {
		env, steps, err := loadBuildkite(path)
		if err == nil && env["RECKON_SHA256"] != "" {
			env["RECKON_SHA256"] = e.sum
		}
		return env, steps, err
	}
	annotation := func(b *bkBuild) string {
		st, err := os.ReadFile(filepath.Join(b.store, "annotations", "reckon-summary.style"))
		if err != nil {
			return "no reckon-summary annotation"
		}
		return "annotation reckon-summary " + strings.TrimSpace(string(st))
	}
	if e.calibrate {
		// The pre-merge calibration: a build with RECKON_CALIBRATE=1, appended to the DSN.
		t0 := time.Now()
		env, steps, err := load()
		if err != nil {
			return err
		}
		b := &bkBuild{dir: filepath.Join(e.out, "ws", "buildkite-calibrate"), fetch: "refs/heads/main", vars: map[string]string{
			"BUILDKITE_COMMIT": e.mainSHA, "BUILDKITE_BRANCH": "main", "BUILDKITE_PULL_REQUEST": "false",
			"BUILDKITE_PULL_REQUEST_BASE_BRANCH": "", "BUILDKITE_SOURCE": "schedule", "RECKON_CALIBRATE": "1",
		}}
		if err := k.runBuild(env, steps, b); err != nil {
			return fmt.Errorf("buildkite calibrate: %w", err)
		}
		got, detail := pipelineVerdict(b.results)
		pages, _ := filepath.Glob(filepath.Join(b.store, "artifacts", "*", "history", "history.html"))
		page := filepath.Join(b.store, "artifacts", "none", "history", "history.html")
		if len(pages) > 0 {
			page = pages[0]
		}
		got, detail = storeVerdict(got, detail, "premerge", 1, k.agent["RECKON_HISTORY_DSN"], page, "in RECKON_HISTORY_DSN (the store the PR builds read)")
		e.add(row{Template: "buildkite-calibrate", Scenario: "calibrate (A/A of main, appended)", Expected: "green", Got: got, Detail: detail}, t0)
	}
	for _, p := range prs {
		t0 := time.Now()
		env, steps, err := load()
		if err != nil {
			return err
		}
		b := &bkBuild{dir: filepath.Join(e.out, "ws", "buildkite-premerge-"+p.sc.name), fetch: fmt.Sprintf("refs/pull/%d/head", p.n), vars: map[string]string{
			"BUILDKITE_COMMIT": p.head, "BUILDKITE_BRANCH": "pr-" + p.sc.name, "BUILDKITE_PULL_REQUEST": fmt.Sprint(p.n),
			"BUILDKITE_PULL_REQUEST_BASE_BRANCH": "main", "BUILDKITE_PULL_REQUEST_REPO": "file://" + e.origin, "BUILDKITE_SOURCE": "webhook",
		}}
		if err := k.runBuild(env, steps, b); err != nil {
			return fmt.Errorf("buildkite premerge %s: %w", p.sc.name, err)
		}
		got, detail := pipelineVerdict(b.results)
		e.add(row{Template: "buildkite-premerge", Scenario: p.sc.name, Expected: p.sc.expect("buildkite"), Got: got, Detail: strings.TrimPrefix(detail+"; "+annotation(b), "; ") + attackLog(detail, b.dir)}, t0)
	}
	for night := 1; night <= nights && e.nightly; night++ {
		t0 := time.Now()
		env, steps, err := load()
		if err != nil {
			return err
		}
		b := &bkBuild{dir: filepath.Join(e.out, "ws", fmt.Sprintf("buildkite-nightly-%d", night)), fetch: "refs/heads/main", vars: map[string]string{
			"BUILDKITE_COMMIT": e.mainSHA, "BUILDKITE_BRANCH": "main", "BUILDKITE_PULL_REQUEST": "false",
			"BUILDKITE_PULL_REQUEST_BASE_BRANCH": "", "BUILDKITE_SOURCE": "schedule",
			"RECKON_BOOTSTRAP": map[bool]string{true: "1", false: ""}[bootstrapNight(night)],
		}}
		if err := k.runBuild(env, steps, b); err != nil {
			return fmt.Errorf("buildkite nightly %d: %w", night, err)
		}
		got, detail := pipelineVerdict(b.results)
		pages, _ := filepath.Glob(filepath.Join(b.store, "artifacts", "*", "history", "history.html"))
		page := filepath.Join(b.store, "artifacts", "none", "history", "history.html")
		if len(pages) > 0 {
			page = pages[0]
		}
		got, detail = historyVerdict(got, detail, night, k.agent["RECKON_HISTORY_DSN"], page,
			"in RECKON_HISTORY_DSN (agent environment hook), trend page in the merge step's history/ artifact; "+annotation(b))
		e.add(row{Template: "buildkite-nightly", Scenario: fmt.Sprintf("night-%d (shards, merge, history, trend)", night), Expected: "green", Got: got, Detail: detail}, t0)
	}
	return nil
}

func (e *e2e) k8s() error {
	raw, err := os.ReadFile(filepath.Join(e.root, "ci/engine/k8s/reckon-shards.yaml"))
	if err != nil {
		return err
	}
	// The image: the default branch's engine build (its own .reckon/build-engine.sh, as the
	// image's build runs it) at /src, its trusted .reckon/ at /trusted.
	img := filepath.Join(e.out, "ws", "k8s-image")
	src, trusted := filepath.Join(img, "src"), filepath.Join(img, "trusted")
	if out, err := sh("", e.env, "git", "clone", "-q", e.origin, src); err != nil {
		return fmt.Errorf("%s", out)
	}
	if out, err := sh(src, e.env, "git", "checkout", "-q", "--detach", e.mainSHA); err != nil {
		return fmt.Errorf("%s", out)
	}
	if out, err := sh(src, e.env, ".reckon/build-engine.sh", ".", "engines/main"); err != nil {
		return fmt.Errorf("image build: %s", out)
	}
	if err := os.MkdirAll(trusted, 0o755); err != nil {
		return err
	}
	if out, err := sh(src, e.env, "bash", "-c", "git archive HEAD .reckon | tar -x -C "+shellQuote(trusted)); err != nil {
		return fmt.Errorf("%s", out)
	}
	pv := filepath.Join(e.out, "ws", "k8s-pv", "reckon-results")
	if err := os.MkdirAll(pv, 0o755); err != nil {
		return err
	}
	imgEnv := map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"}
	for _, kv := range e.env {
		if v, ok := strings.CutPrefix(kv, "RECKON_RELEASE_URL="); ok {
			imgEnv["RECKON_RELEASE_URL"] = v // the release mirror the cluster reaches
		}
	}
	for night := 1; night <= nights && e.nightly; night++ {
		t0 := time.Now()
		runID := fmt.Sprintf("nightly-2026010%d-%d", night, 300+night)
		manifest := strings.ReplaceAll(string(raw), "RECKON_RUN_ID_VALUE", runID)
		if bootstrapNight(night) {
			// A bootstrap night: RECKON_BOOTSTRAP "1" in both Jobs, as the manifest's header says.
			manifest = strings.ReplaceAll(manifest, "- name: RECKON_BOOTSTRAP\n              value: \"\"", "- name: RECKON_BOOTSTRAP\n              value: \"1\"")
		}
		jobs, err := k8sjobs.Decode(manifest)
		if err != nil {
			return fmt.Errorf("k8s manifest: %w", err)
		}
		pinK8s(jobs, e.sum)
		c := &k8sCluster{log: e.log, image: map[string]string{"/src": src, "/trusted": trusted}, imgEnv: imgEnv, workdir: "/src",
			pvcs: map[string]string{"reckon-results": pv}, secrets: map[string]map[string]string{"reckon-history": {"dsn": "/results/history.db"}},
			dir: filepath.Join(e.out, "ws", fmt.Sprintf("k8s-nightly-%d", night))}
		var res []jobResult
		for _, j := range jobs {
			r, err := c.runJob(j)
			if err != nil {
				return fmt.Errorf("k8s night %d: job %s: %w", night, j.Name, err)
			}
			res = append(res, r...)
		}
		got, detail := pipelineVerdict(res)
		if got == "green" {
			if _, err := os.Stat(filepath.Join(pv, runID, "merged", "results.json")); err != nil {
				got, detail = "error", "no merged results under /results/"+runID
			}
		}
		got, detail = historyVerdict(got, detail, night, filepath.Join(pv, "history.db"), filepath.Join(pv, "trend", "history.html"),
			"in RECKON_HISTORY (Secret reckon-history), trend page /results/trend/, run "+runID)
		e.add(row{Template: "k8s-nightly", Scenario: fmt.Sprintf("night-%d (shards, merge, history, trend)", night), Expected: "green", Got: got, Detail: detail}, t0)
	}
	return nil
}
