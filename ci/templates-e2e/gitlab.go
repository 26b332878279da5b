package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml"
)

// A GitLab CI runner for the templates (shell executor, bash), as far as they need one: the
// pipeline's jobs in stage order, each one's rules (if: over the pipeline's variables; when;
// variables), extends and YAML anchors resolved, parallel: N as N jobs with CI_NODE_INDEX and
// CI_NODE_TOTAL, variables at pipeline, job and rule level expanded as the runner expands them,
// the CI_* predefined variables, the checkout (git init + fetch of the pipeline's ref at
// GIT_DEPTH, CI_COMMIT_SHA detached) into a fresh CI_PROJECT_DIR, before_script + script run as
// one bash -eo pipefail script line after line (the runner's trace tells which line it stopped
// in), after_script in its own shell, artifacts (paths, when) kept in a local store and given to
// the jobs that need them, and the one API the templates call with CI_JOB_TOKEN (the default
// branch's last successful artifact of a job, the history chain) served locally.

type glRunner struct {
	origin  string
	baseEnv []string
	log     *os.File
	api     *glAPI
	pipe    int // pipeline id counter
	job     int // job id counter
}

// glAPI serves GET /api/v4/projects/:id/jobs/artifacts/:ref/raw/*path?job=NAME from the last
// successful pipeline of ref, for requests with a running job's JOB-TOKEN.
type glAPI struct {
	url    string
	mu     sync.Mutex
	tokens map[string]bool
	latest map[string]map[string]string // ref -> job name -> artifact dir
}

const glProjectID = "42"

func startGitLabAPI() (*glAPI, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &glAPI{url: "http://" + ln.Addr().String() + "/api/v4", tokens: map[string]bool{}, latest: map[string]map[string]string{}}
	prefix := "/api/v4/projects/" + glProjectID + "/jobs/artifacts/"
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if !a.tokens[r.Header.Get("JOB-TOKEN")] {
			http.Error(w, "401 Unauthorized", http.StatusUnauthorized)
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		ref, path, ok2 := strings.Cut(rest, "/raw/")
		if !ok || !ok2 || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		dir := a.latest[ref][r.URL.Query().Get("job")]
		if dir == "" || strings.Contains(path, "..") {
			http.Error(w, "404 Not Found", http.StatusNotFound)
			return
		}
		http.ServeFile(w, r, filepath.Join(dir, path))
	}))
	return a, nil
}

type glJob struct {
	name   string
	stage  string
	def    map[string]any
	when   string
	vars   map[string]string
	node   int // CI_NODE_INDEX, 0 when not parallel
	total  int
	needs  []string
	result *jobResult
	arts   string // artifact dir
}

// loadGitLab reads a pipeline file with its anchors, aliases and extends resolved.
func loadGitLab(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc, nil
}

func deepMerge(base, over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if bm, ok := out[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				out[k] = deepMerge(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}

func glResolve(doc map[string]any, name string, depth int) (map[string]any, error) {
	j, ok := doc[name].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("no job %s", name)
	}
	ext, _ := j["extends"].(string)
	if ext == "" || depth > 10 {
		return j, nil
	}
	base, err := glResolve(doc, ext, depth+1)
	if err != nil {
		return nil, err
	}
	return deepMerge(base, j), nil
}

// flatScript flattens a script: list (anchors make nested lists).
func flatScript(x any) []string {
	var out []string
	switch v := x.(type) {
	case nil:
	case string:
		out = append(out, v)
	case []any:
		for _, y := range v {
			out = append(out, flatScript(y)...)
		}
	default:
		out = append(out, fmt.Sprint(v))
	}
	return out
}

func glVars(x any) map[string]string {
	out := map[string]string{}
	if m, ok := x.(map[string]any); ok {
		for k, v := range m {
			if vm, ok := v.(map[string]any); ok {
				v = vm["value"]
			}
			if v == nil {
				v = ""
			}
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

var glVarRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// glExpand expands $VAR and ${VAR} in a variable's value from vars (the runner's expansion of
// variables that reference other variables); unknown variables expand to "".
func glExpand(s string, vars map[string]string) string {
	return glVarRef.ReplaceAllStringFunc(s, func(m string) string {
		g := glVarRef.FindStringSubmatch(m)
		name := g[1] + g[2]
		return vars[name]
	})
}

var glClause = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_]*)\s*(?:(==|!=)\s*"([^"]*)"|(=~|!~)\s*/(.*)/)?$`)

// glIf evaluates a rules: if: of the forms the templates use: clauses joined by &&, each
// $VAR == "x", $VAR != "x", $VAR =~ /re/, $VAR !~ /re/ or $VAR.
func glIf(expr string, vars map[string]string) (bool, error) {
	if strings.Contains(expr, "||") || strings.Contains(expr, "(") && !strings.Contains(expr, "/") {
		return false, fmt.Errorf("rules if %q: not understood by this runner", expr)
	}
	for _, c := range strings.Split(expr, "&&") {
		m := glClause.FindStringSubmatch(strings.TrimSpace(c))
		if m == nil {
			return false, fmt.Errorf("rules if %q: clause %q not understood by this runner", expr, c)
		}
		v, set := vars[m[1]]
		var ok bool
		switch m[2] + m[4] {
		case "":
			ok = set && v != ""
		case "==":
			ok = v == m[3]
		case "!=":
			ok = v != m[3]
		case "=~", "!~":
			rx, err := regexp.Compile(m[5])
			if err != nil {
				return false, err
			}
			ok = rx.MatchString(v) == (m[4] == "=~")
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// glPipelineRun is one pipeline: its predefined variables and where its jobs run.
type glPipelineRun struct {
	dir     string            // workspaces and artifacts
	vars    map[string]string // predefined pipeline variables (CI_PIPELINE_SOURCE, CI_COMMIT_SHA, ...)
	fetch   string            // the ref the runner fetches for the checkout
	ref     string            // the pipeline's ref (for the artifacts API)
	success bool
	jobs    []*glJob
}

// runPipeline runs every job the rules put into the pipeline, stage after stage.
func (g *glRunner) runPipeline(doc map[string]any, p *glPipelineRun) error {
	g.pipe++
	p.vars["CI_PIPELINE_ID"] = fmt.Sprint(7000 + g.pipe)
	p.vars["CI_PIPELINE_IID"] = fmt.Sprint(g.pipe)
	global := glVars(doc["variables"])
	var stages []string
	for _, s := range flatScript(doc["stages"]) {
		stages = append(stages, s)
	}
	if len(stages) == 0 {
		stages = []string{"build", "test", "deploy"}
	}
	// Rules see the predefined and the pipeline's variables.
	ruleVars := map[string]string{}
	for k, v := range p.vars {
		ruleVars[k] = v
	}
	for k, v := range global {
		ruleVars[k] = glExpand(v, ruleVars)
	}
	var names []string
	for k := range doc {
		if strings.HasPrefix(k, ".") || k == "stages" || k == "variables" || k == "default" || k == "include" || k == "workflow" {
			continue
		}
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		def, err := glResolve(doc, name, 0)
		if err != nil {
			return err
		}
		stage, _ := def["stage"].(string)
		if stage == "" {
			stage = "test"
		}
		when, _ := def["when"].(string)
		if when == "" {
			when = "on_success"
		}
		ruleSet := map[string]string{}
		if rules, ok := def["rules"].([]any); ok {
			matched := false
			for _, r := range rules {
				rm, _ := r.(map[string]any)
				cond, _ := rm["if"].(string)
				ok := true
				if cond != "" {
					if ok, err = glIf(cond, ruleVars); err != nil {
						return err
					}
				}
				if ok {
					matched = true
					if w, _ := rm["when"].(string); w != "" {
						when = w
					}
					ruleSet = glVars(rm["variables"])
					break
				}
			}
			if !matched {
				when = "never"
			}
		}
		if when == "never" {
			fmt.Fprintf(g.log, "=== gitlab: job %s not in this pipeline (rules)\n", name)
			continue
		}
		vars := map[string]string{}
		for k, v := range p.vars {
			vars[k] = v
		}
		for _, layer := range []map[string]string{global, glVars(def["variables"]), ruleSet} {
			for k, v := range layer {
				vars[k] = v
			}
		}
		var needs []string
		for _, n := range flatScript(def["needs"]) {
			needs = append(needs, n)
		}
		total := toInt(def["parallel"])
		if total == 0 {
			p.jobs = append(p.jobs, &glJob{name: name, stage: stage, def: def, when: when, vars: vars, needs: needs})
			continue
		}
		for i := 1; i <= total; i++ {
			p.jobs = append(p.jobs, &glJob{name: name, stage: stage, def: def, when: when, vars: vars, needs: needs, node: i, total: total})
		}
	}
	p.success = true
	for si, stage := range stages {
		for _, j := range p.jobs {
			if j.stage != stage {
				continue
			}
			// Its needs (or every job of the earlier stages): their status and artifacts.
			var deps []*glJob
			for _, d := range p.jobs {
				if d.result == nil {
					continue
				}
				if j.needs != nil {
					for _, n := range j.needs {
						if d.name == n {
							deps = append(deps, d)
						}
					}
				} else if idx(stages, d.stage) < si {
					deps = append(deps, d)
				}
			}
			depsOK := true
			for _, d := range deps {
				depsOK = depsOK && d.result.Exit == 0
			}
			if j.when == "on_success" && !depsOK || j.when == "on_failure" && depsOK {
				fmt.Fprintf(g.log, "=== gitlab: job %s skipped (when %s)\n", j.label(), j.when)
				continue
			}
			if err := g.runJob(p, j, deps); err != nil {
				return fmt.Errorf("job %s: %w", j.label(), err)
			}
			if j.result.Exit != 0 {
				p.success = false
			}
		}
	}
	if p.success {
		g.api.mu.Lock()
		m := map[string]string{}
		for _, j := range p.jobs {
			if j.result != nil && j.arts != "" {
				m[j.name] = j.arts
			}
		}
		g.api.latest[p.ref] = m
		g.api.mu.Unlock()
	}
	return nil
}

func idx(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

func (j *glJob) label() string {
	if j.total > 0 {
		return fmt.Sprintf("%s %d/%d", j.name, j.node, j.total)
	}
	return j.name
}

// runJob: checkout, artifacts of its dependencies, before_script + script, after_script, its
// artifacts.
func (g *glRunner) runJob(p *glPipelineRun, j *glJob, deps []*glJob) error {
	g.job++
	slug := strings.ReplaceAll(j.label(), " ", "-")
	slug = strings.ReplaceAll(slug, "/", "-of-")
	ws := filepath.Join(p.dir, slug)
	tmp := ws + ".tmp"
	for _, d := range []string{ws, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	token := fmt.Sprintf("glcbt-e2e-%d-%d", g.pipe, g.job)
	g.api.mu.Lock()
	g.api.tokens[token] = true
	g.api.mu.Unlock()
	defer func() {
		g.api.mu.Lock()
		delete(g.api.tokens, token)
		g.api.mu.Unlock()
	}()
	vars := map[string]string{}
	for k, v := range j.vars {
		vars[k] = v
	}
	for k, v := range map[string]string{
		"CI": "true", "GITLAB_CI": "true", "CI_SERVER": "yes", "CI_PROJECT_DIR": ws, "CI_BUILDS_DIR": p.dir,
		"CI_JOB_NAME": j.label(), "CI_JOB_STAGE": j.stage, "CI_JOB_ID": fmt.Sprint(90000 + g.job), "CI_JOB_TOKEN": token,
		"CI_PROJECT_ID": glProjectID, "CI_PROJECT_PATH": "fixture/engine", "CI_API_V4_URL": g.api.url,
		"CI_REPOSITORY_URL": "file://" + g.origin, "CI_DEFAULT_BRANCH": "main",
	} {
		vars[k] = v
	}
	if j.total > 0 {
		vars["CI_NODE_INDEX"], vars["CI_NODE_TOTAL"] = fmt.Sprint(j.node), fmt.Sprint(j.total)
	}
	// The runner expands variables that reference variables (once, in the job's set).
	for k, v := range vars {
		if strings.Contains(v, "$") {
			vars[k] = glExpand(v, vars)
		}
	}
	fmt.Fprintf(g.log, "=== gitlab job %s (pipeline %s, %s) in %s\n", j.label(), p.vars["CI_PIPELINE_ID"], p.vars["CI_PIPELINE_SOURCE"], ws)
	// The checkout: the runner's git init + fetch of the pipeline's ref at GIT_DEPTH (default
	// 20, 0 = the whole history), CI_COMMIT_SHA detached.
	depth := "20"
	if d, ok := vars["GIT_DEPTH"]; ok && d != "" {
		depth = d
	}
	fetch := []string{"fetch", "-q", "origin", "+" + p.fetch + ":refs/remotes/origin/pipeline"}
	if depth != "0" {
		fetch = append(fetch[:2], append([]string{"--depth", depth}, fetch[2:]...)...)
	}
	for _, c := range [][]string{{"init", "-q"}, {"remote", "add", "origin", "file://" + g.origin}, fetch, {"checkout", "-q", "--detach", vars["CI_COMMIT_SHA"]}} {
		if out, err := sh(ws, g.baseEnv, "git", c...); err != nil {
			return fmt.Errorf("checkout: %s", out)
		}
	}
	for _, d := range deps {
		if d.arts != "" {
			if err := copyTree(d.arts, ws); err != nil {
				return err
			}
		}
	}
	lines := append(flatScript(j.def["before_script"]), flatScript(j.def["script"])...)
	trace := filepath.Join(tmp, "trace")
	var sb strings.Builder
	sb.WriteString("set -eo pipefail\nset +o noclobber\n")
	for i, l := range lines {
		fmt.Fprintf(&sb, "echo %d > %s\nprintf '%%s\\n' %s\n%s\n", i, shellQuote(trace), shellQuote("$ "+l), l)
	}
	env := envList(g.baseEnv, vars)
	script := filepath.Join(tmp, "script.sh")
	if err := os.WriteFile(script, []byte(sb.String()), 0o644); err != nil {
		return err
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", script)
	cmd.Dir, cmd.Env = ws, env
	code, out, err := runLogged(cmd, filepath.Join(tmp, "log.txt"), g.log, 30*time.Minute)
	if err != nil {
		return err
	}
	// Which line it stopped in: the gate (reckon gate/merge) or the exit $status after it.
	gate := false
	if b, err := os.ReadFile(trace); err == nil {
		var n int
		fmt.Sscan(string(b), &n)
		if n < len(lines) {
			l := strings.TrimSpace(lines[n])
			gate = runsReckon(l) || l == "exit $status" && n > 0 && anyRunsReckon(lines[:n])
		}
	}
	j.result = &jobResult{Name: "gitlab " + j.label(), Exit: code, Gate: gate, Closing: lastClosing(out), Refused: refusedRe.MatchString(out)}
	if after := flatScript(j.def["after_script"]); len(after) > 0 {
		var ab strings.Builder
		ab.WriteString("set -eo pipefail\n")
		for _, l := range after {
			fmt.Fprintf(&ab, "printf '%%s\\n' %s\n%s\n", shellQuote("$ "+l), l)
		}
		as := filepath.Join(tmp, "after.sh")
		if err := os.WriteFile(as, []byte(ab.String()), 0o644); err != nil {
			return err
		}
		c := exec.Command("bash", "--noprofile", "--norc", as)
		c.Dir, c.Env = ws, env
		if _, _, err := runLogged(c, filepath.Join(tmp, "after-log.txt"), g.log, 5*time.Minute); err != nil {
			return err
		}
	}
	fmt.Fprintf(g.log, "=== gitlab job %s: exit %d\n", j.label(), code)
	// Artifacts: paths when the job's status matches artifacts:when.
	a, _ := j.def["artifacts"].(map[string]any)
	if a != nil {
		when, _ := a["when"].(string)
		if when == "" {
			when = "on_success"
		}
		if when == "always" || when == "on_success" && code == 0 || when == "on_failure" && code != 0 {
			j.arts = filepath.Join(p.dir, "artifacts", fmt.Sprint(90000+g.job))
			if err := os.MkdirAll(j.arts, 0o755); err != nil {
				return err
			}
			for _, pat := range flatScript(a["paths"]) {
				rels, err := globFiles(ws, glExpand(pat, vars))
				if err != nil {
					return err
				}
				if err := copyFiles(ws, j.arts, rels); err != nil {
					return err
				}
			}
			if rep, ok := a["reports"].(map[string]any); ok {
				if ju, ok := rep["junit"].(string); ok {
					if _, err := os.Stat(filepath.Join(ws, ju)); err != nil {
						fmt.Fprintf(g.log, "WARNING: junit report %s: no file\n", ju)
					}
				}
			}
		}
	}
	return nil
}

func anyRunsReckon(lines []string) bool {
	for _, l := range lines {
		if runsReckon(l) {
			return true
		}
	}
	return false
}

func (p *glPipelineRun) results() []jobResult {
	var out []jobResult
	for _, j := range p.jobs {
		if j.result != nil {
			out = append(out, *j.result)
		}
	}
	return out
}

// jobArtifacts returns the artifact dir of the last run job named name.
func (p *glPipelineRun) jobArtifacts(name string) string {
	dir := ""
	for _, j := range p.jobs {
		if j.name == name && j.arts != "" {
			dir = j.arts
		}
	}
	return dir
}

func toInt(x any) int {
	switch v := x.(type) {
	case int:
		return v
	case int64:
		return int(v)
	case uint64:
		return int(v)
	case float64:
		return int(v)
	case string:
		var n int
		fmt.Sscan(v, &n)
		return n
	}
	return 0
}
