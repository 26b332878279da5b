package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
)

// A Buildkite agent for the templates, as far as they need one: the pipeline as
// `buildkite-agent pipeline upload` makes it (pipeline env; ${VAR} and $VAR interpolated at
// upload time from the uploading job's environment, $$ left as $ for run time), then its steps
// in order: a command step (parallelism: N as N jobs with BUILDKITE_PARALLEL_JOB 0..N-1 and
// BUILDKITE_PARALLEL_JOB_COUNT) runs in a fresh checkout (a full clone; a pull request build at
// the PR's head commit) with the agent's environment (BUILDKITE_*, the pipeline's and step's
// env, the agent's environment hook) through the agent's default shell, bash -e -c; after it
// its artifact_paths are uploaded; a wait stops the build after a failure unless
// continue_on_failure. buildkite-agent itself (artifact upload/download, annotate) is a small
// script on the agent's PATH that moves files through the build's local artifact store and
// keeps the annotations there. The junit-annotate plugin is done locally: it downloads the
// JUnit artifact and annotates the build with it.

type bkRunner struct {
	origin  string
	baseEnv []string
	log     *os.File
	agent   map[string]string // the agent's environment hook
	build   int
	job     int
}

// bkBuild is one build: its BUILDKITE_* variables and where it runs.
type bkBuild struct {
	dir     string
	vars    map[string]string // BUILDKITE_COMMIT, BUILDKITE_BRANCH, BUILDKITE_PULL_REQUEST, ...
	fetch   string            // the ref the agent fetches for the checkout
	store   string            // artifacts and annotations
	results []jobResult
}

const bkAgentShim = `#!/usr/bin/env bash
# buildkite-agent as this local agent provides it: artifact upload/download through the build's
# artifact store, annotate into the build's annotations.
set -euo pipefail
store=%s
shopt -s globstar nullglob
case "${1:-} ${2:-}" in
"artifact upload")
	n=0
	IFS=';' read -r -a pats <<<"$3"
	for pat in "${pats[@]}"; do
		for f in $pat; do
			[ -f "$f" ] || continue
			mkdir -p "$store/artifacts/$BUILDKITE_JOB_ID/$(dirname "$f")"
			cp -p "$f" "$store/artifacts/$BUILDKITE_JOB_ID/$f"
			n=$((n + 1))
		done
	done
	echo "buildkite-agent: uploaded $n artifacts ($3)"
	;;
"artifact download")
	dest="$(cd "${4:-.}" && pwd)"
	n=0
	for job in "$store"/artifacts/*/; do
		pushd "$job" >/dev/null
		for f in $3; do
			[ -f "$f" ] || continue
			mkdir -p "$dest/$(dirname "$f")"
			cp -p "$f" "$dest/$f"
			n=$((n + 1))
		done
		popd >/dev/null
	done
	if [ "$n" = 0 ]; then
		echo "buildkite-agent: no artifacts found for $3" >&2
		exit 1
	fi
	echo "buildkite-agent: downloaded $n artifacts ($3)"
	;;
annotate*)
	shift
	context=default style=default body=""
	while [ $# -gt 0 ]; do
		case "$1" in
		--context) context="$2"; shift 2 ;;
		--style) style="$2"; shift 2 ;;
		--append) shift ;;
		*) body="$1"; shift ;;
		esac
	done
	if [ -z "$body" ]; then body="$(cat)"; fi
	mkdir -p "$store/annotations"
	printf '%%s\n' "$style" > "$store/annotations/$context.style"
	printf '%%s\n' "$body" > "$store/annotations/$context.md"
	echo "buildkite-agent: annotated $context ($style)"
	;;
*)
	echo "buildkite-agent: $* is not provided by this local agent" >&2
	exit 1
	;;
esac
`

var bkInterp = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// bkInterpolate does the upload-time interpolation: $$ -> $, ${VAR}, ${VAR:-x}, $VAR from env.
func bkInterpolate(s string, env map[string]string) string {
	return bkInterp.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		g := bkInterp.FindStringSubmatch(m)
		name := g[1] + g[3]
		if v, ok := env[name]; ok && v != "" {
			return v
		}
		return g[2]
	})
}

func loadBuildkite(path string) (map[string]string, []map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var doc struct {
		Env   map[string]string `yaml:"env"`
		Steps []map[string]any  `yaml:"steps"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc.Env, doc.Steps, nil
}

// runBuild uploads the pipeline and runs its steps.
func (k *bkRunner) runBuild(env map[string]string, steps []map[string]any, b *bkBuild) error {
	k.build++
	b.store = filepath.Join(b.dir, "store")
	bin := filepath.Join(b.dir, "agent-bin")
	for _, d := range []string{b.store, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "buildkite-agent"), []byte(fmt.Sprintf(bkAgentShim, shellQuote(b.store))), 0o755); err != nil {
		return err
	}
	b.vars["BUILDKITE_BUILD_NUMBER"] = fmt.Sprint(k.build)
	b.vars["BUILDKITE_BUILD_ID"] = fmt.Sprintf("0190e2e0-0000-4000-8000-%012d", k.build)
	// Upload-time interpolation: the uploading job's environment and the pipeline's env.
	upload := map[string]string{}
	for k, v := range b.vars {
		upload[k] = v
	}
	for k, v := range env {
		upload[k] = v
	}
	failed := false
	for _, s := range steps {
		if _, ok := s["wait"]; ok {
			if failed && fmt.Sprint(s["continue_on_failure"]) != "true" {
				fmt.Fprintln(k.log, "=== buildkite: wait: an earlier step failed, the build stops")
				return nil
			}
			continue
		}
		n := toInt(s["parallelism"])
		jobs := max(n, 1)
		for i := 0; i < jobs; i++ {
			r, err := k.runJob(env, upload, s, b, i, n)
			if err != nil {
				return err
			}
			b.results = append(b.results, r)
			if r.Exit != 0 {
				failed = true
			}
		}
	}
	return nil
}

func (k *bkRunner) runJob(pipeEnv, upload map[string]string, s map[string]any, b *bkBuild, par, count int) (jobResult, error) {
	k.job++
	label := fmt.Sprint(s["label"])
	key, _ := s["key"].(string)
	if key == "" {
		key = fmt.Sprintf("step-%d", k.job)
	}
	name := key
	if count > 0 {
		name = fmt.Sprintf("%s-%d", key, par)
	}
	ws := filepath.Join(b.dir, name)
	tmp := ws + ".tmp"
	for _, d := range []string{ws, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return jobResult{}, err
		}
	}
	jobID := fmt.Sprintf("0190e2e0-0000-4000-9000-%012d", k.job)
	vars := map[string]string{}
	for k2, v := range k.agent {
		vars[k2] = v
	}
	for k2, v := range b.vars {
		vars[k2] = v
	}
	for k2, v := range map[string]string{
		"CI": "true", "BUILDKITE": "true", "BUILDKITE_JOB_ID": jobID, "BUILDKITE_LABEL": label, "BUILDKITE_STEP_KEY": key,
		"BUILDKITE_BUILD_CHECKOUT_PATH": ws, "BUILDKITE_REPO": "file://" + k.origin, "BUILDKITE_PIPELINE_SLUG": "engine",
		"BUILDKITE_ORGANIZATION_SLUG": "fixture", "BUILDKITE_PIPELINE_DEFAULT_BRANCH": "main", "BUILDKITE_AGENT_NAME": "gpu-1",
	} {
		vars[k2] = v
	}
	if count > 0 {
		vars["BUILDKITE_PARALLEL_JOB"], vars["BUILDKITE_PARALLEL_JOB_COUNT"] = fmt.Sprint(par), fmt.Sprint(count)
	}
	for k2, v := range pipeEnv {
		vars[k2] = bkInterpolate(v, upload)
	}
	if se, ok := s["env"].(map[string]any); ok {
		for k2, v := range se {
			vars[k2] = bkInterpolate(fmt.Sprint(v), upload)
		}
	}
	vars["PATH"] = filepath.Join(b.dir, "agent-bin") + ":" + os.Getenv("PATH")
	fmt.Fprintf(k.log, "=== buildkite job %s (build %d) in %s\n", name, k.build, ws)
	// The checkout: a full clone, the build's commit.
	for _, c := range [][]string{{"init", "-q"}, {"remote", "add", "origin", "file://" + k.origin},
		{"fetch", "-q", "origin", "+refs/heads/*:refs/remotes/origin/*"}, {"fetch", "-q", "origin", b.fetch},
		{"checkout", "-q", "-f", "--detach", vars["BUILDKITE_COMMIT"]}} {
		if out, err := sh(ws, k.baseEnv, "git", c...); err != nil {
			return jobResult{}, fmt.Errorf("checkout: %s", out)
		}
	}
	env := envList(k.baseEnv, vars)
	r := jobResult{Name: "buildkite " + name}
	switch {
	case s["command"] != nil || s["commands"] != nil:
		cmdText := strings.Join(flatScript(s["command"]), "\n")
		if s["commands"] != nil {
			cmdText = strings.Join(flatScript(s["commands"]), "\n")
		}
		cmdText = bkInterpolate(cmdText, upload)
		cmd := exec.Command("/bin/bash", "-e", "-c", cmdText)
		cmd.Dir, cmd.Env = ws, env
		code, out, err := runLogged(cmd, filepath.Join(tmp, "log.txt"), k.log, 30*time.Minute)
		if err != nil {
			return r, err
		}
		r.Exit, r.Closing, r.Refused = code, lastClosing(out), refusedRe.MatchString(out)
		r.Gate = runsReckon(cmdText)
	case s["plugins"] != nil:
		code, err := k.plugins(s["plugins"], ws, tmp, env)
		if err != nil {
			return r, err
		}
		r.Exit = code
	default:
		return r, fmt.Errorf("step %s: neither command nor plugins", label)
	}
	// The agent uploads artifact_paths after the command, whatever its exit.
	var pats []string
	for _, p := range flatScript(s["artifact_paths"]) {
		pats = append(pats, bkInterpolate(p, upload))
	}
	if len(pats) > 0 {
		c := exec.Command(filepath.Join(b.dir, "agent-bin", "buildkite-agent"), "artifact", "upload", strings.Join(pats, ";"))
		c.Dir, c.Env = ws, env
		if code, _, err := runLogged(c, filepath.Join(tmp, "upload.txt"), k.log, 5*time.Minute); err != nil || code != 0 {
			return r, fmt.Errorf("artifact upload: exit %d %v", code, err)
		}
	}
	fmt.Fprintf(k.log, "=== buildkite job %s: exit %d\n", name, r.Exit)
	return r, nil
}

// plugins runs the plugins the templates use, locally: junit-annotate downloads the JUnit
// artifact and annotates the build with its failures (exit 0: it annotates, it does not judge).
func (k *bkRunner) plugins(x any, ws, tmp string, env []string) (int, error) {
	list, _ := x.([]any)
	for _, p := range list {
		m, _ := p.(map[string]any)
		for name, cfg := range m {
			base, _, _ := strings.Cut(name, "#")
			c, _ := cfg.(map[string]any)
			switch base {
			case "junit-annotate":
				script := fmt.Sprintf(`set -eo pipefail
mkdir -p junit
buildkite-agent artifact download %s junit
f="$(find junit -name '*.xml' | head -1)"
failures="$(grep -c '<failure' "$f" || true)"
if [ "$failures" != 0 ] || [ %s = true ]; then
  printf 'JUnit: %%s failures in %%s\n' "$failures" "$f" | buildkite-agent annotate --context %s --style "$([ "$failures" = 0 ] && echo success || echo error)"
fi
`, shellQuote(fmt.Sprint(c["artifacts"])), shellQuote(fmt.Sprint(c["always-annotate"])), shellQuote(fmt.Sprint(c["context"])))
				cmd := exec.Command("bash", "--noprofile", "--norc", "-c", script)
				cmd.Dir, cmd.Env = ws, env
				code, _, err := runLogged(cmd, filepath.Join(tmp, "plugin.txt"), k.log, 5*time.Minute)
				if err != nil || code != 0 {
					return code, err
				}
			default:
				return 0, fmt.Errorf("plugin %s: no local equivalent in this agent", name)
			}
		}
	}
	return 0, nil
}
