// Package ci_test checks reckon's CI templates: the GitHub Actions workflows with actionlint (as a
// library, no network) and reckon's own safety rules, the Buildkite and GitLab files' structure,
// and the GPU lock script's behaviour.
package ci_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/rhysd/actionlint"
)

var workflows = []string{"github/nightly.yml", "github/premerge.yml"}

// lint runs actionlint on one workflow's content with the templates' configuration.
func lint(t *testing.T, path string, content []byte) []*actionlint.Error {
	t.Helper()
	// shellcheck checks the run: scripts too when it is installed; the test runs without it.
	sc, _ := exec.LookPath("shellcheck")
	l, err := actionlint.NewLinter(io.Discard, &actionlint.LinterOptions{
		ConfigFile: "github/actionlint.yaml",
		Shellcheck: sc,
	})
	if err != nil {
		t.Fatalf("actionlint: %v", err)
	}
	errs, err := l.Lint(path, content, nil)
	if err != nil {
		t.Fatalf("actionlint %s: %v", path, err)
	}
	return errs
}

func TestWorkflowsPassActionlint(t *testing.T) {
	for _, wf := range workflows {
		data, err := os.ReadFile(wf)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range lint(t, wf, data) {
			t.Errorf("%s:%d:%d: %s [%s]", wf, e.Line, e.Column, e.Message, e.Kind)
		}
	}
}

func TestActionlintCatchesBrokenWorkflows(t *testing.T) {
	data, err := os.ReadFile("github/nightly.yml")
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string][2]string{
		"unknown runner label":  {"[self-hosted, linux, gpu]", "[self-hosted, linux, gpux]"},
		"bad expression":        {"${{ !cancelled() }}", "${{ !cancelled( }}"},
		"unknown action input":  {"if-no-files-found: warn", "if-no-file-found: warn"},
		"bad cron":              {`"23 2 * * *"`, `"23 25 * * *"`},
		"unknown context":       {"${{ github.run_id }}", "${{ githubb.run_id }}"},
		"untrusted interpolate": {`--spec "$RECKON_SPEC"`, `--spec "${{ github.event.head_commit.message }}"`},
	} {
		bad := strings.Replace(string(data), edit[0], edit[1], 1)
		if bad == string(data) {
			t.Fatalf("%s: edit did not apply", name)
		}
		if errs := lint(t, "bad.yml", []byte(bad)); len(errs) == 0 {
			t.Errorf("%s: actionlint found nothing", name)
		}
	}
}

// workflow is the part of a workflow the safety rules look at.
type workflow struct {
	On          map[string]any    `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Concurrency struct {
		Group            string `yaml:"group"`
		CancelInProgress bool   `yaml:"cancel-in-progress"`
	} `yaml:"concurrency"`
	Jobs map[string]struct {
		If             string   `yaml:"if"`
		RunsOn         []string `yaml:"runs-on"`
		TimeoutMinutes int      `yaml:"timeout-minutes"`
		Steps          []struct {
			Name string         `yaml:"name"`
			Uses string         `yaml:"uses"`
			Run  string         `yaml:"run"`
			If   string         `yaml:"if"`
			With map[string]any `yaml:"with"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

// secretRef matches a use of repository secrets in an expression.
var secretRef = regexp.MustCompile(`secrets\.[A-Za-z_]`)

// strictGate matches a gate command line that passes --strict: CI never counts a check that
// decided nothing (no baseline, inconclusive, an input filtered out) as green.
// A gate run through the verify-and-exec wrapper (reckon.sh BIN_DIR gate) counts; $strict (or
// Buildkite's $$strict) is --strict unless a bootstrap or calibration clears it (checkStrictSwitch).
var strictGate = regexp.MustCompile(`reckon(\.sh \S+)? gate [^\n]*(\\\n[^\n]*)*(--strict\b|\$\$?strict\b)`)

// checkCommon: the rules both workflows follow. It returns the violations.
func checkCommon(wf *workflow, raw string) []string {
	var bad []string
	if wf.Concurrency.Group == "" {
		bad = append(bad, "no concurrency group")
	}
	if secretRef.MatchString(raw) {
		bad = append(bad, "uses repository secrets")
	}
	if wf.Permissions == nil {
		bad = append(bad, "no explicit permissions (the default token may be read-write)")
	}
	if p := wf.Permissions["contents"]; p != "read" {
		bad = append(bad, "contents permission is "+p)
	}
	if len(wf.Jobs) == 0 {
		bad = append(bad, "no jobs")
	}
	for name, j := range wf.Jobs {
		if !slices.Contains(j.RunsOn, "self-hosted") || !slices.Contains(j.RunsOn, "gpu") {
			bad = append(bad, fmt.Sprintf("job %s: runs-on %v is not the self-hosted GPU runner", name, j.RunsOn))
		}
		var locked, summary, upload, junit bool
		for _, s := range j.Steps {
			switch {
			case strings.Contains(s.Run, "ci/scripts/gpu-lock.sh") && strings.Contains(s.Run, "reckon gate"):
				locked = true
				if !strictGate.MatchString(s.Run) {
					bad = append(bad, fmt.Sprintf("job %s: step %q runs the gate without --strict (an inconclusive or unbaselined check would pass)", name, s.Name))
				}
				// --timeout under the job's own (engine_test.go): a CI timeout cancels, and a
				// cancelled job uploads nothing.
				for _, cmd := range gateCommands(s.Run) {
					for _, b := range checkGateCommand(fmt.Sprintf("job %s: step %q", name, s.Name), cmd, j.TimeoutMinutes) {
						if !strings.Contains(b, "without --strict") {
							bad = append(bad, b)
						}
					}
				}
			case strings.Contains(s.Run, "reckon gate"):
				bad = append(bad, fmt.Sprintf("job %s: step %q runs the gate without the GPU lock", name, s.Name))
			case strings.Contains(s.Run, "step-summary.sh"):
				summary = s.If != ""
			case strings.HasPrefix(s.Uses, "actions/upload-artifact@"):
				upload = s.If != "" && fmt.Sprint(s.With["path"]) == "out/"
			case strings.HasPrefix(s.Uses, "mikepenz/action-junit-report@"):
				junit = s.If != "" && fmt.Sprint(s.With["report_paths"]) == "out/junit.xml"
			}
		}
		if !locked {
			bad = append(bad, fmt.Sprintf("job %s: the gate does not run under ci/scripts/gpu-lock.sh", name))
		}
		if !summary || !upload || !junit {
			bad = append(bad, fmt.Sprintf("job %s: reports not published after a red gate (summary %v, upload %v, junit %v)", name, summary, upload, junit))
		}
	}
	return bad
}

// checkPremerge: pull_request only, read-only token, label gate, fork pushes not run unreviewed.
func checkPremerge(wf *workflow, raw string) []string {
	bad := checkCommon(wf, raw)
	for ev := range wf.On {
		if ev != "pull_request" {
			bad = append(bad, "triggered by "+ev+" (only pull_request keeps fork code away from secrets)")
		}
	}
	if _, ok := wf.On["pull_request"]; !ok {
		bad = append(bad, "not triggered by pull_request")
	}
	for k, v := range wf.Permissions {
		if v != "read" && v != "none" {
			bad = append(bad, fmt.Sprintf("permission %s: %s (pre-merge must be read-only)", k, v))
		}
	}
	for name, j := range wf.Jobs {
		if !strings.Contains(j.If, "contains(github.event.pull_request.labels.*.name, 'perf-gate')") {
			bad = append(bad, fmt.Sprintf("job %s: no perf-gate label condition", name))
		}
		if !strings.Contains(j.If, "github.event.pull_request.head.repo.full_name == github.repository") {
			bad = append(bad, fmt.Sprintf("job %s: a fork's later pushes would run without review", name))
		}
	}
	return bad
}

func checkNightly(wf *workflow, raw string) []string {
	bad := checkCommon(wf, raw)
	if _, ok := wf.On["schedule"]; !ok {
		bad = append(bad, "no schedule trigger")
	}
	if _, ok := wf.On["workflow_dispatch"]; !ok {
		bad = append(bad, "no workflow_dispatch trigger")
	}
	if wf.Concurrency.CancelInProgress {
		bad = append(bad, "a new nightly would cancel a running gate")
	}
	return bad
}

func parseWorkflow(t *testing.T, raw string) *workflow {
	t.Helper()
	var wf workflow
	if err := yaml.Unmarshal([]byte(raw), &wf); err != nil {
		t.Fatalf("parse workflow: %v", err)
	}
	return &wf
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPremergeIsSafeForForks(t *testing.T) {
	raw := readFile(t, "github/premerge.yml")
	if bad := checkPremerge(parseWorkflow(t, raw), raw); len(bad) > 0 {
		t.Errorf("premerge.yml:\n  %s", strings.Join(bad, "\n  "))
	}
	for name, edit := range map[string][2]string{
		"pull_request_target": {"  pull_request:\n", "  pull_request_target:\n"},
		"write token":         {"permissions:\n  contents: read\n", "permissions:\n  contents: write\n  pull-requests: write\n"},
		"no label gate":       {"contains(github.event.pull_request.labels.*.name, 'perf-gate') &&", "true &&"},
		"fork pushes":         {"github.event.pull_request.head.repo.full_name == github.repository", "true"},
		"no gpu lock":         {"ci/scripts/gpu-lock.sh --timeout 3600 -- \\\n            ", ""},
		"secrets":             {"RECKON_LABEL_FILTER: premerge", "RECKON_LABEL_FILTER: premerge\n      HF_TOKEN: ${{ secrets.HF_TOKEN }}"},
		"no summary on red":   {"      - name: Publish the summary\n        if: ${{ !cancelled() }}\n", "      - name: Publish the summary\n"},
		"not strict":          {" --out out --strict", " --out out"},
		"no timeout":          {" --strict --timeout 100m", " --strict"},
		"timeout past job's":  {"timeout-minutes: 180", "timeout-minutes: 100"},
	} {
		bad := strings.Replace(raw, edit[0], edit[1], 1)
		if bad == raw {
			t.Fatalf("%s: edit did not apply", name)
		}
		if len(checkPremerge(parseWorkflow(t, bad), bad)) == 0 {
			t.Errorf("%s: the safety rules did not object", name)
		}
	}
}

func TestNightlyRunsScheduledUnderTheLock(t *testing.T) {
	raw := readFile(t, "github/nightly.yml")
	if bad := checkNightly(parseWorkflow(t, raw), raw); len(bad) > 0 {
		t.Errorf("nightly.yml:\n  %s", strings.Join(bad, "\n  "))
	}
	for name, edit := range map[string][2]string{
		"no schedule":      {"  schedule:\n    - cron: \"23 2 * * *\" # 02:23 UTC, off the top of the hour when scheduled runs queue up\n", ""},
		"cancels":          {"cancel-in-progress: false", "cancel-in-progress: true"},
		"hosted runner":    {"runs-on: [self-hosted, linux, gpu]", "runs-on: [ubuntu-latest]"},
		"junit elsewhere":  {"report_paths: out/junit.xml", "report_paths: junit.xml"},
		"no upload on red": {"      - name: Upload the reports\n        if: ${{ !cancelled() }}\n", "      - name: Upload the reports\n"},
		"not strict":       {" --require-baseline --strict", " --require-baseline"},
		"no timeout":       {" --strict --timeout 210m", " --strict"},
	} {
		bad := strings.Replace(raw, edit[0], edit[1], 1)
		if bad == raw {
			t.Fatalf("%s: edit did not apply", name)
		}
		if len(checkNightly(parseWorkflow(t, bad), bad)) == 0 {
			t.Errorf("%s: the rules did not object", name)
		}
	}
}

func TestGitLabJob(t *testing.T) {
	raw := readFile(t, "gitlab/.gitlab-ci.yml")
	var doc map[string]struct {
		Tags          []string `yaml:"tags"`
		ResourceGroup string   `yaml:"resource_group"`
		Script        []string `yaml:"script"`
		Rules         []struct {
			If string `yaml:"if"`
		} `yaml:"rules"`
		Artifacts struct {
			When    string            `yaml:"when"`
			Paths   []string          `yaml:"paths"`
			Reports map[string]string `yaml:"reports"`
		} `yaml:"artifacts"`
	}
	if err := yaml.Unmarshal([]byte(strings.Replace(raw, "stages:\n  - gate\n", "", 1)), &doc); err != nil {
		t.Fatalf("gitlab-ci: %v", err)
	}
	j, ok := doc["reckon-gate"]
	if !ok {
		t.Fatal("no reckon-gate job")
	}
	if j.Artifacts.Reports["junit"] != "out/junit.xml" || j.Artifacts.When != "always" || !slices.Contains(j.Artifacts.Paths, "out/") {
		t.Errorf("artifacts: %+v", j.Artifacts)
	}
	if !slices.Contains(j.Tags, "gpu") || j.ResourceGroup == "" {
		t.Errorf("not pinned to the GPU runner under a resource group: tags %v group %q", j.Tags, j.ResourceGroup)
	}
	if !strings.Contains(strings.Join(j.Script, "\n"), "ci/scripts/gpu-lock.sh") {
		t.Error("gate not under the GPU lock")
	}
	if !strictGate.MatchString(strings.Join(j.Script, "\n")) {
		t.Error("gate without --strict")
	}
	if _, ok := gateTimeout(strings.Join(j.Script, "\n")); !ok {
		t.Error("gate without --timeout (a job timeout cancels it before its reports are written)")
	}
	if !strings.Contains(raw, "RECKON_EXTRA: --require-baseline") || !strings.Contains(strings.Join(j.Script, "\n"), "$RECKON_EXTRA") {
		t.Error("the nightly does not pass --require-baseline")
	}
	var sched, mr bool
	for _, r := range j.Rules {
		sched = sched || strings.Contains(r.If, `"schedule"`)
		mr = mr || strings.Contains(r.If, "merge_request_event") && strings.Contains(r.If, "perf-gate")
	}
	if !sched || !mr {
		t.Errorf("rules: schedule %v, labelled merge requests %v", sched, mr)
	}
}

func TestBuildkitePipeline(t *testing.T) {
	raw := readFile(t, "buildkite/pipeline.yml")
	var doc struct {
		Steps []map[string]any `yaml:"steps"`
	}
	if err := yaml.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	var gate map[string]any
	var annotate bool
	for _, s := range doc.Steps {
		if s["key"] == "reckon-gate" {
			gate = s
		}
		if strings.Contains(fmt.Sprint(s["plugins"]), "junit-annotate") && strings.Contains(fmt.Sprint(s["plugins"]), "out/junit.xml") {
			annotate = true
		}
	}
	if gate == nil {
		t.Fatal("no reckon-gate step")
	}
	cmd := fmt.Sprint(gate["command"])
	if !strings.Contains(cmd, "ci/scripts/gpu-lock.sh") || !strings.Contains(cmd, "buildkite-agent annotate") || !strictGate.MatchString(cmd) {
		t.Errorf("gate command (under the GPU lock, annotated, --strict): %s", cmd)
	}
	if _, ok := gateTimeout(strings.ReplaceAll(cmd, "\\\n", " ")); !ok || !strings.Contains(cmd, "echo --require-baseline") {
		t.Errorf("gate command without --timeout, or a nightly without --require-baseline: %s", cmd)
	}
	// Run-time variables must be escaped ($$), or Buildkite substitutes them at upload time.
	for _, line := range strings.Split(cmd, "\n") {
		if i := strings.Index(strings.ReplaceAll(line, "$$", ""), "$"); i >= 0 {
			t.Errorf("unescaped $ in the gate command: %q", line)
		}
	}
	if fmt.Sprint(gate["agents"]) != "map[queue:gpu]" || gate["concurrency_group"] == nil || !strings.Contains(fmt.Sprint(gate["artifact_paths"]), "out/") {
		t.Errorf("gate step: %v", gate)
	}
	if !annotate {
		t.Error("no JUnit annotation step")
	}
}

// TestGPULockSerialisesJobs holds the lock in one process and checks that a second job cannot
// take it, then can once the first has finished; exit statuses pass through.
func TestGPULockSerialisesJobs(t *testing.T) {
	for _, tool := range []string{"bash", "flock"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	script, err := filepath.Abs("scripts/gpu-lock.sh")
	if err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(t.TempDir(), "gpu.lock")
	run := func(args ...string) (int, string) {
		cmd := exec.Command(script, append([]string{"--lock", lock}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, out.String()
		case errors.As(err, &ee):
			return ee.ExitCode(), out.String()
		}
		t.Fatalf("gpu-lock.sh: %v", err)
		return -1, ""
	}

	// First job: takes the lock, says so, then waits for its stdin to close.
	holder := exec.Command(script, "--lock", lock, "--", "bash", "-c", "echo holding; read -r _ || true")
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = holder.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "holding\n" {
		t.Fatalf("holder did not start: %q %v", line, err)
	}

	code, out := run("--timeout", "0", "--", "true")
	if code != 3 || !strings.Contains(out, "GPUs busy") {
		t.Fatalf("second job while the lock is held: exit %d, output %q; want 3 and 'GPUs busy'", code, out)
	}

	_ = stdin.Close()
	if err := holder.Wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	if code, out := run("--timeout", "0", "--", "true"); code != 0 {
		t.Fatalf("after release: exit %d, output %q", code, out)
	}
	if code, _ := run("--", "bash", "-c", "exit 7"); code != 7 {
		t.Errorf("command's exit status not passed through: %d", code)
	}
	if code, out := run("true"); code != 2 || !strings.Contains(out, "usage") {
		t.Errorf("missing --: exit %d %q", code, out)
	}
	if code, _ := run("--timeout", "soon", "--", "true"); code != 2 {
		t.Errorf("bad timeout: exit %d", code)
	}
}

func TestStepSummaryPublishesOrSaysWhyNot(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "step_summary")
	run := func(file string) (string, string) {
		cmd := exec.Command("scripts/step-summary.sh", file)
		cmd.Env = append(os.Environ(), "GITHUB_STEP_SUMMARY="+target)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("step-summary.sh: %v\n%s", err, out)
		}
		b, _ := os.ReadFile(target)
		return string(out), string(b)
	}
	summary := filepath.Join(dir, "summary.md")
	if err := os.WriteFile(summary, []byte("## ❌ FAIL: reckon gate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, got := run(summary); got != "## ❌ FAIL: reckon gate\n" || !strings.Contains(out, "FAIL") {
		t.Errorf("summary not published: log %q, step summary %q", out, got)
	}
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	if _, got := run(filepath.Join(dir, "missing.md")); !strings.Contains(got, "reckon: no report") {
		t.Errorf("a missing summary is not reported: %q", got)
	}
}

func TestScriptsPassShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck not installed (apt-get install shellcheck)")
	}
	scripts, err := filepath.Glob("scripts/*.sh")
	builds, _ := filepath.Glob("engine/build/*.sh")
	scripts = append(scripts, builds...)
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	if out, err := exec.Command(sc, scripts...).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.sh")
	if err := os.WriteFile(bad, []byte("#!/usr/bin/env bash\nrm -rf $1/*\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(sc, bad).Run(); err == nil {
		t.Error("shellcheck accepted an unquoted rm -rf $1/*")
	}
}
