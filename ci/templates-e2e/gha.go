package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
)

// A GitHub Actions runner for the templates, as far as they need one: each step's run: script
// is executed as written, with bash -eo pipefail in the job's workspace and the environment
// GitHub gives it (workflow, job and step env with their ${{ }} expressions evaluated, the
// GITHUB_* variables and files, RUNNER_TEMP); uses: steps are done by the equivalent local
// operation: actions/checkout clones the fixture's origin at the ref it names (GitHub's
// refs/pull/N/merge for a pull request), upload/download-artifact copy through a local store,
// setup-go and the JUnit annotator are no-ops. Anything else is an error.

type ghWorkflow struct {
	Env  map[string]string `yaml:"env"`
	Jobs map[string]*ghJob `yaml:"jobs"`
}

type ghJob struct {
	Env      map[string]string `yaml:"env"`
	Strategy struct {
		Matrix map[string][]any `yaml:"matrix"`
	} `yaml:"strategy"`
	Steps []ghStep `yaml:"steps"`
}

type ghStep struct {
	Name string            `yaml:"name"`
	ID   string            `yaml:"id"`
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	If   string            `yaml:"if"`
	Env  map[string]string `yaml:"env"`
	With map[string]any    `yaml:"with"`
}

func loadWorkflow(path string) (*ghWorkflow, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var wf ghWorkflow
	if err := yaml.Unmarshal(b, &wf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &wf, nil
}

// ghRun is one job's execution context.
type ghRun struct {
	origin    string            // the fixture's bare repository (the "GitHub" remote)
	workspace string            // GITHUB_WORKSPACE
	artifacts string            // the run's artifact store
	ctx       map[string]string // expression contexts: github.*, matrix.*, vars.*, runner.*
	baseEnv   []string          // the runner machine's environment
	log       *os.File
	stepID    string // the id: of the step running now (its outputs)
}

// stepResult is what happened to one step.
type stepResult struct {
	Name string
	Exit int
	// Refused: the step refused to run reckon on a changed trusted tree or binary.
	Refused bool
}

var exprRe = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// eval evaluates the expressions the templates use in env values and with: inputs.
func (r *ghRun) eval(s string) (string, error) {
	var bad error
	out := exprRe.ReplaceAllStringFunc(s, func(m string) string {
		e := exprRe.FindStringSubmatch(m)[1]
		alts := strings.Split(e, "||")
		for _, a := range alts {
			a = strings.TrimSpace(a)
			if strings.HasPrefix(a, "'") && strings.HasSuffix(a, "'") {
				return strings.Trim(a, "'")
			}
			v, ok := r.ctx[a]
			if !ok && !strings.HasPrefix(a, "vars.") {
				bad = fmt.Errorf("expression %q: no value for %s in this runner", e, a)
				return ""
			}
			if v != "" {
				return v
			}
		}
		return ""
	})
	return out, bad
}

// cond evaluates a step's if: (the templates use !cancelled(), always(), failure(), success()
// and hashFiles(...) != ”); nothing is ever cancelled here.
func (r *ghRun) cond(s string, failed bool) (bool, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "${{"), "}}")
	s = strings.TrimSpace(s)
	if s == "" {
		return !failed, nil
	}
	ok := true
	for _, part := range strings.Split(s, "&&") {
		part = strings.TrimSpace(part)
		switch {
		case part == "!cancelled()" || part == "always()":
		case part == "success()":
			ok = ok && !failed
		case part == "failure()":
			ok = ok && failed
		case strings.HasPrefix(part, "hashFiles('") && strings.HasSuffix(part, "') != ''"):
			f := strings.TrimSuffix(strings.TrimPrefix(part, "hashFiles('"), "') != ''")
			_, err := os.Stat(filepath.Join(r.workspace, f))
			ok = ok && err == nil
		default:
			return false, fmt.Errorf("if: %q: not understood by this runner", s)
		}
	}
	// A condition without a status function implies success().
	if !strings.Contains(s, "cancelled()") && !strings.Contains(s, "always()") && !strings.Contains(s, "failure()") {
		ok = ok && !failed
	}
	return ok, nil
}

// runJob runs every step of job; it returns the steps' results. env is the workflow's env.
func (r *ghRun) runJob(wf *ghWorkflow, name string) ([]stepResult, error) {
	j := wf.Jobs[name]
	if j == nil {
		return nil, fmt.Errorf("no job %s", name)
	}
	if err := os.MkdirAll(r.workspace, 0o755); err != nil {
		return nil, err
	}
	temp := r.workspace + ".temp"
	if err := os.MkdirAll(temp, 0o755); err != nil {
		return nil, err
	}
	r.ctx["runner.temp"] = temp
	files := map[string]string{}
	for _, f := range []string{"GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"} {
		files[f] = filepath.Join(temp, strings.ToLower(f))
		if err := os.WriteFile(files[f], nil, 0o644); err != nil {
			return nil, err
		}
	}
	env := map[string]string{}
	for _, layer := range []map[string]string{wf.Env, j.Env} {
		for k, v := range layer {
			ev, err := r.eval(v)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", k, err)
			}
			env[k] = ev
		}
	}
	var res []stepResult
	failed := false
	for i, s := range j.Steps {
		label := s.Name
		if label == "" {
			label = fmt.Sprintf("step %d", i+1)
		}
		run, err := r.cond(s.If, failed)
		if err != nil {
			return res, fmt.Errorf("step %q: %w", label, err)
		}
		if !run {
			fmt.Fprintf(r.log, "--- skip: %s\n", label)
			continue
		}
		fmt.Fprintf(r.log, "--- step: %s\n", label)
		r.stepID = s.ID
		stepEnv := map[string]string{}
		for k, v := range env {
			stepEnv[k] = v
		}
		for k, v := range s.Env {
			ev, err := r.eval(v)
			if err != nil {
				return res, fmt.Errorf("step %q env %s: %w", label, k, err)
			}
			stepEnv[k] = ev
		}
		code, refused := 0, false
		switch {
		case s.Run != "":
			code, refused, err = r.runScript(s.Run, stepEnv, files)
		case s.Uses != "":
			code, err = r.uses(s)
		default:
			err = fmt.Errorf("neither run nor uses")
		}
		if err != nil {
			return res, fmt.Errorf("step %q: %w", label, err)
		}
		fmt.Fprintf(r.log, "--- exit %d: %s\n", code, label)
		res = append(res, stepResult{Name: label, Exit: code, Refused: refused})
		if code != 0 {
			failed = true
		}
	}
	return res, nil
}

// runScript runs a run: block as GitHub's default bash shell does (bash --noprofile --norc
// -eo pipefail FILE) and applies GITHUB_ENV and GITHUB_PATH afterwards.
func (r *ghRun) runScript(script string, stepEnv, files map[string]string) (int, bool, error) {
	f, err := os.CreateTemp(r.ctx["runner.temp"], "step-*.sh")
	if err != nil {
		return 0, false, err
	}
	if _, err := f.WriteString(script); err != nil {
		return 0, false, err
	}
	f.Close()
	env := append([]string{}, r.baseEnv...)
	env = append(env, r.ghEnv(files)...)
	keys := make([]string, 0, len(stepEnv))
	for k := range stepEnv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+stepEnv[k])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-eo", "pipefail", f.Name())
	cmd.Dir = r.workspace
	cmd.Env = env
	// The step's output in a file of its own (not a pipe: a process the step leaves running
	// must not hold the step open), then appended to the main log.
	out, err := os.CreateTemp(r.ctx["runner.temp"], "step-*.log")
	if err != nil {
		return 0, false, err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	text, _ := os.ReadFile(out.Name())
	r.log.Write(text)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		return 0, false, err
	}
	// GITHUB_PATH lines go in front of PATH for the next steps; GITHUB_ENV lines become env.
	if b, _ := os.ReadFile(files["GITHUB_PATH"]); len(b) > 0 {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			r.prependPath(l)
		}
		_ = os.WriteFile(files["GITHUB_PATH"], nil, 0o644)
	}
	// GITHUB_OUTPUT lines (name=value) become steps.<id>.outputs.<name> for the later steps.
	if b, _ := os.ReadFile(files["GITHUB_OUTPUT"]); len(b) > 0 {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok && r.stepID != "" {
				r.ctx["steps."+r.stepID+".outputs."+k] = v
			}
		}
		_ = os.WriteFile(files["GITHUB_OUTPUT"], nil, 0o644)
	}
	return code, refusedRe.Match(text), nil
}

func (r *ghRun) prependPath(dir string) {
	for i, kv := range r.baseEnv {
		if strings.HasPrefix(kv, "PATH=") {
			r.baseEnv[i] = "PATH=" + dir + ":" + strings.TrimPrefix(kv, "PATH=")
		}
	}
}

func (r *ghRun) ghEnv(files map[string]string) []string {
	env := []string{
		"CI=true", "GITHUB_ACTIONS=true",
		"GITHUB_WORKSPACE=" + r.workspace, "RUNNER_TEMP=" + r.ctx["runner.temp"],
		"GITHUB_RUN_ID=" + r.ctx["github.run_id"], "GITHUB_RUN_ATTEMPT=" + r.ctx["github.run_attempt"],
		"GITHUB_SHA=" + r.ctx["github.sha"], "GITHUB_REPOSITORY=" + r.ctx["github.repository"],
		"GITHUB_EVENT_NAME=" + r.ctx["github.event_name"], "GITHUB_REF=" + r.ctx["github.ref"],
	}
	for k, v := range files {
		env = append(env, k+"="+v)
	}
	return env
}

// uses does what a third-party action does, locally.
func (r *ghRun) uses(s ghStep) (int, error) {
	action, _, _ := strings.Cut(s.Uses, "@")
	with := map[string]string{}
	for k, v := range s.With {
		ev, err := r.eval(fmt.Sprint(v))
		if err != nil {
			return 0, fmt.Errorf("with %s: %w", k, err)
		}
		with[k] = ev
	}
	switch action {
	case "actions/checkout":
		ref := with["ref"]
		if ref == "" {
			ref = r.ctx["github.sha"]
		}
		dest := filepath.Join(r.workspace, with["path"])
		if with["path"] == "" {
			// The workspace itself: GitHub checks out into it.
			dest = r.workspace
		}
		if _, err := os.Stat(filepath.Join(dest, ".git")); err == nil {
			return 0, fmt.Errorf("checkout into %s: already a repository (this runner's workspaces are fresh)", dest)
		}
		if out, err := sh("", r.baseEnv, "git", "clone", "-q", "--no-checkout", r.origin, dest); err != nil {
			return 1, fmt.Errorf("%s", out)
		}
		if sc := with["sparse-checkout"]; sc != "" {
			if out, err := sh(dest, r.baseEnv, "git", "sparse-checkout", "set", "--no-cone", strings.Fields(sc)[0]); err != nil {
				return 1, fmt.Errorf("%s", out)
			}
		}
		if out, err := sh(dest, r.baseEnv, "git", "fetch", "-q", "origin", ref); err != nil {
			return 1, fmt.Errorf("%s", out)
		}
		if out, err := sh(dest, r.baseEnv, "git", "checkout", "-q", "--detach", "FETCH_HEAD"); err != nil {
			return 1, fmt.Errorf("%s", out)
		}
		if with["persist-credentials"] == "false" {
			// No credentials to drop for a local origin; the remote stays, as on GitHub.
			return 0, nil
		}
		return 0, nil
	case "actions/setup-go":
		return 0, nil // Go is on this machine's PATH
	case "actions/upload-artifact":
		name := with["name"]
		src := filepath.Join(r.workspace, strings.TrimSuffix(with["path"], "/"))
		if _, err := os.Stat(src); err != nil {
			if with["if-no-files-found"] == "error" {
				return 1, nil
			}
			fmt.Fprintf(r.log, "upload-artifact %s: no files at %s\n", name, with["path"])
			return 0, nil
		}
		dst := filepath.Join(r.artifacts, name)
		if _, err := os.Stat(dst); err == nil {
			return 1, nil // v4: an artifact name is unique within a run
		}
		_, err := sh("", r.baseEnv, "cp", "-a", src+"/.", dst+"/")
		if err != nil {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return 0, err
			}
			_, err = sh("", r.baseEnv, "cp", "-a", src+"/.", dst+"/")
		}
		return 0, err
	case "actions/download-artifact":
		dest := filepath.Join(r.workspace, with["path"])
		var names []string
		if n := with["name"]; n != "" {
			names = []string{n}
		} else {
			ents, _ := os.ReadDir(r.artifacts)
			for _, e := range ents {
				if ok, _ := filepath.Match(with["pattern"], e.Name()); ok {
					names = append(names, e.Name())
				}
			}
		}
		for _, n := range names {
			to := filepath.Join(dest, n)
			if with["name"] != "" {
				to = dest
			}
			if err := os.MkdirAll(to, 0o755); err != nil {
				return 0, err
			}
			if _, err := sh("", r.baseEnv, "cp", "-a", filepath.Join(r.artifacts, n)+"/.", to+"/"); err != nil {
				return 0, err
			}
		}
		return 0, nil
	case "mikepenz/action-junit-report":
		if with["require_tests"] == "true" {
			if _, err := os.Stat(filepath.Join(r.workspace, with["report_paths"])); err != nil {
				return 1, nil
			}
		}
		return 0, nil
	}
	return 0, fmt.Errorf("uses %s: no local equivalent in this runner", s.Uses)
}
