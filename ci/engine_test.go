package ci_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/reckon-ci/reckon/spec"
)

// The templates for an engine's own repository (ci/engine/): reckon installed as a pinned tool,
// main's and the PR's engine side by side, spec and baselines from the trusted base commit,
// --strict with a --timeout under the CI's own, the PR comment through workflow_run, a shard
// matrix with a merge job, Buildkite and GitLab equivalents, and a Kubernetes Indexed Job
// (k8s_test.go). Every rule is shown failing on a broken variant.

var engineWorkflows = []string{"engine/github/reckon-premerge.yml", "engine/github/reckon-comment.yml", "engine/github/reckon-nightly.yml", "engine/github/reckon-calibrate.yml"}

// engineWorkflow is what the engine templates' rules read of a workflow.
type engineWorkflow struct {
	On          map[string]any    `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Env         map[string]string `yaml:"env"`
	Jobs        map[string]struct {
		If             string            `yaml:"if"`
		Needs          any               `yaml:"needs"`
		RunsOn         any               `yaml:"runs-on"`
		TimeoutMinutes int               `yaml:"timeout-minutes"`
		Env            map[string]string `yaml:"env"`
		Strategy       struct {
			Matrix map[string][]any `yaml:"matrix"`
		} `yaml:"strategy"`
		Steps []struct {
			Name           string            `yaml:"name"`
			ID             string            `yaml:"id"`
			Env            map[string]string `yaml:"env"`
			Uses           string            `yaml:"uses"`
			Run            string            `yaml:"run"`
			If             string            `yaml:"if"`
			TimeoutMinutes int               `yaml:"timeout-minutes"`
			With           map[string]any    `yaml:"with"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

func parseEngineWorkflow(t *testing.T, raw string) *engineWorkflow {
	t.Helper()
	var wf engineWorkflow
	if err := yaml.Unmarshal([]byte(raw), &wf); err != nil {
		t.Fatalf("parse workflow: %v", err)
	}
	return &wf
}

var (
	// goInstall is a build of reckon from source; floatingInstall one at a moving version.
	goInstall       = regexp.MustCompile(`go install "?github\.com/reckon-ci/reckon/cmd/reckon@`)
	floatingInstall = regexp.MustCompile(`reckon/cmd/reckon@(latest|main|master|HEAD)\b`)
	semverPin       = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
	sha256Pin       = regexp.MustCompile(`^([0-9a-f]{64}|(amd64|arm64)=[0-9a-f]{64}(,(amd64|arm64)=[0-9a-f]{64})*)$`)
	releaseInstall  = regexp.MustCompile(`install-reckon\.sh "\$RECKON_VERSION" "\$RECKON_SHA256" `)
	shaPinnedAction = regexp.MustCompile(`^uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+(\.\d+)*$`)
	// gateTimeoutFlag is the --timeout of a gate command line.
	gateTimeoutFlag = regexp.MustCompile(`--timeout[ =]"?(\d+[hms][0-9hms]*)"?`)
)

// gateRun matches a run of reckon gate: the binary, or the verify-and-exec wrapper
// (reckon.sh BIN_DIR gate).
var gateRun = regexp.MustCompile(`reckon(\.sh \S+)? gate `)

// gateCommands returns each `reckon gate` command line of a script, continuations joined.
func gateCommands(script string) []string {
	joined := strings.ReplaceAll(script, "\\\n", " ")
	var out []string
	for _, l := range strings.Split(joined, "\n") {
		if gateRun.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// gateTimeout returns the --timeout a gate command passes.
func gateTimeout(cmd string) (time.Duration, bool) {
	m := gateTimeoutFlag.FindStringSubmatch(cmd)
	if m == nil {
		return 0, false
	}
	d, err := time.ParseDuration(m[1])
	return d, err == nil && d > 0
}

// checkGateCommand: --strict, and a --timeout at least 10 minutes under the CI's bound of the
// step that runs it (the reports and uploads still need their time).
func checkGateCommand(where, cmd string, ciMinutes int) []string {
	var bad []string
	if !strictGate.MatchString(cmd) {
		bad = append(bad, where+": the gate runs without --strict")
	}
	d, ok := gateTimeout(cmd)
	switch {
	case !ok:
		bad = append(bad, where+": the gate passes no --timeout (a CI timeout is a cancel: no reports, no uploads)")
	case ciMinutes <= 0:
		bad = append(bad, where+": no CI timeout to keep --timeout under")
	case d > time.Duration(ciMinutes-10)*time.Minute:
		bad = append(bad, fmt.Sprintf("%s: --timeout %s is not at least 10 minutes under the CI's %d minutes", where, d, ciMinutes))
	}
	return bad
}

// checkInstall: reckon is a pinned tool: the release archive of tag RECKON_VERSION checked
// against the pinned RECKON_SHA256 (install-reckon.sh) before it runs, in every template; never
// go install (it builds from source at whatever the module proxy serves) or a moving version.
func checkInstall(where, raw string, env map[string]string) []string {
	var bad []string
	release := releaseInstall.MatchString(raw)
	if !release {
		bad = append(bad, where+": reckon is not installed from the pinned release archive (install-reckon.sh \"$RECKON_VERSION\" \"$RECKON_SHA256\" DIR, sha256 verified)")
	}
	if goInstall.MatchString(raw) {
		bad = append(bad, where+": reckon is built with go install instead of installed from the checksummed release archive")
	}
	if floatingInstall.MatchString(raw) {
		bad = append(bad, where+": reckon is installed at a moving version")
	}
	if strings.Contains(raw, "RECKON_VERSION") && !semverPin.MatchString(env["RECKON_VERSION"]) {
		bad = append(bad, fmt.Sprintf("%s: RECKON_VERSION %q is not a release tag vX.Y.Z", where, env["RECKON_VERSION"]))
	}
	if release && !sha256Pin.MatchString(env["RECKON_SHA256"]) {
		bad = append(bad, fmt.Sprintf("%s: RECKON_SHA256 %q is not a sha256 to verify the release archive with", where, env["RECKON_SHA256"]))
	}
	if strings.Contains(raw, "make build") || strings.Contains(raw, "go-version-file: go.mod") {
		bad = append(bad, where+": builds reckon from its own repository (an engine repository has no reckon go.mod or Makefile)")
	}
	return bad
}

// checkActionPins: every action is pinned by a full commit SHA with its tag in a comment (a tag
// can be moved; a commit cannot).
func checkActionPins(raw string) []string {
	var bad []string
	for _, l := range strings.Split(raw, "\n") {
		t := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- "))
		if !strings.HasPrefix(t, "uses:") {
			continue
		}
		if !shaPinnedAction.MatchString(t) {
			bad = append(bad, "action not pinned by commit (uses: owner/repo@<40 hex> # vX.Y.Z): "+t)
		}
	}
	return bad
}

// checkEnginePremerge: the pre-merge A/B gate's rules.
func checkEnginePremerge(wf *engineWorkflow, raw string) []string {
	var bad []string
	for ev := range wf.On {
		if ev != "pull_request" {
			bad = append(bad, "triggered by "+ev+" (only pull_request keeps a PR's code away from write tokens and secrets)")
		}
	}
	for k, v := range wf.Permissions {
		if v != "read" && v != "none" {
			bad = append(bad, fmt.Sprintf("permission %s: %s (pre-merge must be read-only)", k, v))
		}
	}
	if secretRef.MatchString(raw) {
		bad = append(bad, "uses repository secrets")
	}
	j, ok := wf.Jobs["gate"]
	if !ok {
		return append(bad, "no gate job")
	}
	if !strings.Contains(j.If, "contains(github.event.pull_request.labels.*.name, 'perf-gate')") || !strings.Contains(j.If, "github.event.pull_request.head.repo.full_name == github.repository") {
		bad = append(bad, "the gate job is not limited to labelled PRs with fork pushes kept out")
	}
	env := map[string]string{}
	for k, v := range wf.Env {
		env[k] = v
	}
	for k, v := range j.Env {
		env[k] = v
	}
	bad = append(bad, checkInstall("gate", raw, env)...)
	bad = append(bad, checkActionPins(raw)...)
	var base, pr, gate, comment, trusted, cleared, built, digest bool
	for _, s := range j.Steps {
		where := fmt.Sprintf("step %q", s.Name)
		bad = append(bad, checkContainedBuilds(where, s.Run)...)
		bad = append(bad, checkVerifiedReckon(where, s.Run)...)
		if s.ID == "trusted" {
			digest = trusted && strings.Contains(s.Run, `>> "$GITHUB_OUTPUT"`) && strings.Contains(s.Run, "sha256sum")
		}
		// Every step that runs reckon compares the trusted tree with the digest (a step output,
		// held by the runner) first.
		if wrappedReckon.MatchString(s.Run) {
			first := strings.TrimSpace(strings.SplitN(strings.TrimSpace(s.Run), "\n", 2)[0])
			if !digest || s.Env["TRUSTED_SUM"] != "${{ steps.trusted.outputs.sum }}" || !strings.HasSuffix(strings.SplitN(first, " || ", 2)[0], `= "$TRUSTED_SUM" ]`) {
				bad = append(bad, where+": runs reckon without first comparing trusted/ with its recorded digest (TRUSTED_SUM from steps.trusted.outputs.sum)")
			}
		}
		if strings.Contains(s.Run, "build-engine.sh") {
			built = true
			if trusted {
				bad = append(bad, fmt.Sprintf("step %q: runs the PR's build after the trusted checkout (it could rewrite the gate)", s.Name))
			}
		}
		if strings.TrimSpace(s.Run) == "rm -rf trusted" {
			cleared = true
		}
		if strings.HasPrefix(s.Uses, "actions/checkout@") {
			if fmt.Sprint(s.With["persist-credentials"]) != "false" {
				bad = append(bad, fmt.Sprintf("step %q: checkout keeps credentials", s.Name))
			}
			switch fmt.Sprint(s.With["path"]) {
			case "base":
				base = fmt.Sprint(s.With["ref"]) == "${{ github.event.pull_request.base.sha }}"
			case "pr":
				pr = s.With["ref"] == nil
			case "trusted":
				trusted = fmt.Sprint(s.With["ref"]) == "${{ github.event.pull_request.base.sha }}" && built && cleared
			}
		}
		for _, cmd := range gateCommands(s.Run) {
			gate = true
			if !strings.Contains(cmd, "--spec trusted/") || !strings.Contains(cmd, "--baselines trusted/") {
				bad = append(bad, fmt.Sprintf("step %q: spec and baselines are not read from the trusted checkout (trusted/): a PR could loosen its own gate", s.Name))
			}
			if !strings.HasPrefix(strings.TrimSpace(cmd), "trusted/.reckon/gpu-lock.sh") || !strings.Contains(cmd, " trusted/.reckon/reckon.sh trusted/.bin gate") {
				bad = append(bad, fmt.Sprintf("step %q: the GPU lock script or reckon (through trusted/.reckon/reckon.sh) does not come from the trusted checkout", s.Name))
			}
			if !strings.Contains(cmd, "trusted/.reckon/contain.py ") {
				bad = append(bad, fmt.Sprintf("step %q: the gate does not run under contain.py (an engine's leftover would outlive it)", s.Name))
			}
			bad = append(bad, checkReadOnlyHistory(fmt.Sprintf("step %q", s.Name), []string{cmd}, s.Run)...)
			ci := j.TimeoutMinutes
			if s.TimeoutMinutes > 0 {
				ci = min(ci, s.TimeoutMinutes)
			}
			bad = append(bad, checkGateCommand(fmt.Sprintf("step %q", s.Name), cmd, ci)...)
		}
		if strings.HasPrefix(s.Uses, "actions/upload-artifact@") && fmt.Sprint(s.With["name"]) == "reckon-comment" {
			comment = strings.Contains(s.If, "!cancelled()")
		}
	}
	if !base || !pr {
		bad = append(bad, fmt.Sprintf("checkouts: base commit at base/ %v, the PR at pr/ %v (both builds side by side)", base, pr))
	}
	if !trusted {
		bad = append(bad, "no fresh checkout of the base commit into trusted/ after the builds (cleared first)")
	}
	if !digest {
		bad = append(bad, "no step (id: trusted) records the trusted tree's digest as a step output after the trusted checkout")
	}
	if !gate {
		bad = append(bad, "no reckon gate step")
	}
	if !comment {
		bad = append(bad, "the reckon-comment artifact is not uploaded after a red gate")
	}
	return bad
}

// checkComment: the workflow_run comment workflow never runs the PR's code and treats the
// artifact as data.
func checkComment(wf *engineWorkflow, raw string) []string {
	var bad []string
	for ev := range wf.On {
		if ev != "workflow_run" {
			bad = append(bad, "triggered by "+ev+" (the comment runs only after the gate, from workflow_run)")
		}
	}
	for k, v := range wf.Permissions {
		if v == "write" && k != "pull-requests" {
			bad = append(bad, fmt.Sprintf("permission %s: write (only pull-requests: write is needed)", k))
		}
	}
	if wf.Permissions["pull-requests"] != "write" {
		bad = append(bad, "no pull-requests: write permission to comment with")
	}
	if secretRef.MatchString(raw) {
		bad = append(bad, "uses repository secrets")
	}
	bad = append(bad, checkActionPins(raw)...)
	if strings.Contains(raw, "--edit-last") || !strings.Contains(raw, `startswith(\"$marker\")`) || !strings.Contains(raw, `"repos/$REPO/issues/comments/$id"`) {
		bad = append(bad, "the comment is not found by its marker (and author) and edited alone: --edit-last edits whatever comment came last")
	}
	for name, j := range wf.Jobs {
		if !strings.Contains(j.If, "github.event.workflow_run.event == 'pull_request'") {
			bad = append(bad, fmt.Sprintf("job %s: runs for workflow runs that are not pull requests", name))
		}
		for _, s := range j.Steps {
			if strings.HasPrefix(s.Uses, "actions/checkout@") {
				bad = append(bad, fmt.Sprintf("job %s: step %q checks out code (the PR's tree must never run here)", name, s.Name))
			}
			for _, l := range strings.Split(s.Run, "\n") {
				l = strings.TrimSpace(l)
				if regexp.MustCompile(`^(\. |source |bash |sh |"\$DIR|\$DIR|chmod )`).MatchString(l) || strings.Contains(l, "| sh") || strings.Contains(l, "eval ") {
					bad = append(bad, fmt.Sprintf("job %s: step %q may execute the artifact: %s", name, s.Name, l))
				}
			}
			if strings.Contains(s.Run, "pr-number.txt") {
				if !strings.Contains(s.Run, "*[!0-9]*") {
					bad = append(bad, fmt.Sprintf("job %s: the PR number from the artifact is not checked to be a number", name))
				}
				if !strings.Contains(s.Run, `"$HEAD_SHA"`) || !strings.Contains(s.Run, ".head.sha") {
					bad = append(bad, fmt.Sprintf("job %s: the PR's head is not checked against the commit the gate ran", name))
				}
			}
		}
	}
	return bad
}

// checkShardMatrix: the nightly's matrix runs every shard 1..N of one N under the lock, --strict
// and a timeout, and a merge job (after every shard, also a red one) joins all of them.
func checkShardMatrix(wf *engineWorkflow, raw string) []string {
	var bad []string
	g, ok := wf.Jobs["gate"]
	if !ok {
		return []string{"no gate job"}
	}
	env := map[string]string{}
	for k, v := range wf.Env {
		env[k] = v
	}
	bad = append(bad, checkInstall("gate", raw, env)...)
	n, err := strconv.Atoi(env["RECKON_SHARDS"])
	shards := g.Strategy.Matrix["shard"]
	var got []string
	for _, s := range shards {
		got = append(got, fmt.Sprint(s))
	}
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, strconv.Itoa(i))
	}
	if err != nil || !slices.Equal(got, want) {
		bad = append(bad, fmt.Sprintf("matrix shard %v is not 1..RECKON_SHARDS (%q)", got, env["RECKON_SHARDS"]))
	}
	var sharded bool
	for _, s := range g.Steps {
		for _, cmd := range gateCommands(s.Run) {
			sharded = strings.Contains(cmd, `--shard "$SHARD/$RECKON_SHARDS"`) && g.Env["SHARD"] == "${{ matrix.shard }}"
			if !strings.Contains(s.Run, "gpu-lock.sh") {
				bad = append(bad, fmt.Sprintf("step %q: the shard runs without the GPU lock", s.Name))
			}
			ci := g.TimeoutMinutes
			if s.TimeoutMinutes > 0 {
				ci = min(ci, s.TimeoutMinutes)
			}
			bad = append(bad, checkGateCommand(fmt.Sprintf("step %q", s.Name), cmd, ci)...)
			if !strings.Contains(cmd, "--require-baseline") && !(strings.Contains(cmd, "$require ") && strings.Contains(s.Run, "require=--require-baseline")) {
				bad = append(bad, fmt.Sprintf("step %q: the nightly does not pass --require-baseline", s.Name))
			}
		}
	}
	if !sharded {
		bad = append(bad, "the gate does not pass --shard \"$SHARD/$RECKON_SHARDS\" from the matrix")
	}
	m, ok := wf.Jobs["merge"]
	if !ok {
		return append(bad, "no merge job")
	}
	if fmt.Sprint(m.Needs) != "gate" || !strings.Contains(m.If, "!cancelled()") {
		bad = append(bad, fmt.Sprintf("merge job: needs %v if %q (it must run after every shard, red ones too)", m.Needs, m.If))
	}
	var merged, downloaded bool
	for _, s := range m.Steps {
		if strings.HasPrefix(s.Uses, "actions/download-artifact@") && fmt.Sprint(s.With["pattern"]) == "reckon-shard-*" {
			downloaded = true
		}
		if regexp.MustCompile(`reckon(\.sh \S+)? merge `).MatchString(s.Run) && strings.Contains(s.Run, "shards/reckon-shard-*") {
			merged = true
		}
	}
	if !merged || !downloaded {
		bad = append(bad, fmt.Sprintf("merge job: downloads every shard %v, merges them %v", downloaded, merged))
	}
	bad = append(bad, checkActionPins(raw)...)
	// History: shards append nothing; the merge job appends the merged night once, to a store
	// beyond caches (the history branch, or the DSN), and publishes the trend page.
	if g.Env["RECKON_HISTORY"] != "" {
		bad = append(bad, "gate job: RECKON_HISTORY set (a shard would append to it; shards get the history read-only)")
	}
	for _, s := range g.Steps {
		where := fmt.Sprintf("gate step %q", s.Name)
		if cmds := gateCommands(s.Run); len(cmds) > 0 {
			bad = append(bad, checkReadOnlyHistory(where, cmds, s.Run)...)
		}
		bad = append(bad, checkContainedBuilds(where, s.Run)...)
	}
	bad = append(bad, checkVerifiedReckon("nightly", raw)...)
	bad = append(bad, checkStrictSwitch("nightly", raw, false)...)
	if !strings.Contains(raw, "RECKON_BOOTSTRAP: ${{ vars.RECKON_BOOTSTRAP || inputs.bootstrap || '' }}") {
		bad = append(bad, "RECKON_BOOTSTRAP is not taken from the repository variable or the workflow_dispatch input bootstrap")
	}
	var hist bool
	for _, s := range m.Steps {
		if regexp.MustCompile(`reckon(\.sh \S+)? history add`).MatchString(s.Run) {
			hist = strings.Contains(s.Run, "out/results.json") && regexp.MustCompile(`reckon(\.sh \S+)? history report`).MatchString(s.Run) &&
				strings.Contains(s.Run, "push") && strings.Contains(s.Run, "reckon-history") && strings.Contains(s.If, "!cancelled()")
		}
	}
	if !hist {
		bad = append(bad, "merge job: the merged night is not appended to the history branch (red nights too) with its trend page")
	}
	for _, s := range strings.Split(raw, "\n") {
		if strings.Contains(s, "actions/cache@") {
			bad = append(bad, "the history is kept in the Actions cache, which is evicted")
		}
	}
	return bad
}

func TestEngineWorkflowsPassActionlint(t *testing.T) {
	for _, wf := range engineWorkflows {
		data, err := os.ReadFile(wf)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range lint(t, wf, data) {
			t.Errorf("%s:%d:%d: %s [%s]", wf, e.Line, e.Column, e.Message, e.Kind)
		}
	}
	// actionlint does read them: a broken variant of each is caught.
	for wf, edit := range map[string][2]string{
		"engine/github/reckon-comment.yml":  {"run-id: ${{ github.event.workflow_run.id }}", "run-id: ${{ github.event.workflow_run.id }"},
		"engine/github/reckon-premerge.yml": {"    timeout-minutes: 240\n", "    timeout-minutes: forever\n"},
		"engine/github/reckon-nightly.yml":  {"name: GPU gate (shard ${{ matrix.shard }}/2)", "name: GPU gate (shard ${{ matrix.shards }}/2)"},
	} {
		raw := readFile(t, wf)
		bad := strings.Replace(raw, edit[0], edit[1], 1)
		if bad == raw {
			t.Fatalf("%s: edit did not apply", wf)
		}
		if len(lint(t, "bad.yml", []byte(bad))) == 0 {
			t.Errorf("%s: actionlint found nothing in a broken variant", wf)
		}
	}
}

// mutate applies each edit to raw and reports edits that the rules do not object to.
func mutate(t *testing.T, file, raw string, edits map[string][2]string, rules func(string) []string) {
	t.Helper()
	if bad := rules(raw); len(bad) > 0 {
		t.Errorf("%s:\n  %s", file, strings.Join(bad, "\n  "))
	}
	for name, edit := range edits {
		bad := strings.Replace(raw, edit[0], edit[1], 1)
		if bad == raw {
			t.Fatalf("%s: %s: edit did not apply", file, name)
		}
		if len(rules(bad)) == 0 {
			t.Errorf("%s: %s: the rules did not object", file, name)
		}
	}
}

func TestEnginePremergeTakesTheGateFromTheBaseBranch(t *testing.T) {
	raw := readFile(t, "engine/github/reckon-premerge.yml")
	mutate(t, "reckon-premerge.yml", raw, map[string][2]string{
		"spec from the PR":         {"--spec trusted/.reckon/premerge.yaml", "--spec pr/.reckon/premerge.yaml"},
		"spec from base/":          {"--spec trusted/.reckon/premerge.yaml", "--spec base/.reckon/premerge.yaml"},
		"baselines from the PR":    {"--baselines trusted/.reckon/baselines", "--baselines pr/.reckon/baselines"},
		"base is the PR's head":    {"ref: ${{ github.event.pull_request.base.sha }}", "ref: ${{ github.event.pull_request.head.sha }}"},
		"lock script from the PR":  {"trusted/.reckon/gpu-lock.sh --timeout 1800", "pr/.reckon/gpu-lock.sh --timeout 1800"},
		"trusted not cleared":      {"        run: rm -rf trusted\n", "        run: ls\n"},
		"build after trusted":      {"          trusted/.reckon/reckon.sh trusted/.bin spec check trusted/.reckon/premerge.yaml", "          base/.reckon/contain.py base/.reckon/build-engine.sh pr engines/pr HEAD^1"},
		"build not contained":      {"run: base/.reckon/contain.py base/.reckon/build-engine.sh pr engines/pr HEAD^1", "run: base/.reckon/build-engine.sh pr engines/pr HEAD^1"},
		"gate not contained":       {"trusted/.reckon/gpu-lock.sh --timeout 1800 -- trusted/.reckon/contain.py \\\n", "trusted/.reckon/gpu-lock.sh --timeout 1800 -- \\\n"},
		"reckon unverified":        {"trusted/.reckon/reckon.sh trusted/.bin spec check", "trusted/.bin/reckon spec check"},
		"gate unverified":          {"trusted/.reckon/reckon.sh trusted/.bin gate --spec", "trusted/.bin/reckon gate --spec"},
		"no digest check":          {"          TRUSTED_SUM: ${{ steps.trusted.outputs.sum }}\n        run: |\n          [ \"$(", "          TRUSTED_SUM: ${{ steps.trusted.outputs.sum }}\n        run: |\n          true\n          [ \"$("},
		"no digest recorded":       {"        id: trusted\n", "        id: digest\n"},
		"history appended by a PR": {"history=(--history trusted/.history/history.db --history-readonly)", "history=(--history trusted/.history/history.db)"},
		"action by tag":            {"actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2", "actions/checkout@v4"},
		"no checksum":              {"RECKON_SHA256: \"0000000000000000000000000000000000000000000000000000000000000000\"", "RECKON_SHA256: \"\""},
		"not strict":               {" --out out --strict --timeout 150m", " --out out --timeout 150m"},
		"no timeout":               {" --strict --timeout 150m", " --strict"},
		"timeout past the step's":  {"timeout-minutes: 170", "timeout-minutes: 155"},
		"unpinned version":         {"RECKON_VERSION: v0.1.0", "RECKON_VERSION: main"},
		"pull_request_target":      {"  pull_request:\n", "  pull_request_target:\n"},
		"write token":              {"permissions:\n  contents: read\n", "permissions:\n  contents: read\n  pull-requests: write\n"},
		"fork pushes":              {"github.event.pull_request.head.repo.full_name == github.repository", "true"},
		"no comment after red":     {"      - name: Upload the PR comment\n        if: ${{ !cancelled() }}\n", "      - name: Upload the PR comment\n"},
	}, func(s string) []string { return checkEnginePremerge(parseEngineWorkflow(t, s), s) })
}

func TestEngineCommentIsTheSafeWorkflowRunPattern(t *testing.T) {
	raw := readFile(t, "engine/github/reckon-comment.yml")
	mutate(t, "reckon-comment.yml", raw, map[string][2]string{
		"pull_request_target": {"  workflow_run:\n    workflows: [\"reckon pre-merge gate\"]\n    types: [completed]\n", "  pull_request_target:\n"},
		"checks out the PR":   {"      - name: Download the summary (data, not code)\n", "      - name: Check out\n        uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.workflow_run.head_sha }}\n\n      - name: Download the summary (data, not code)\n"},
		"runs the artifact":   {"          pr=\"$(head -c 16", "          bash \"$DIR/post.sh\"\n          pr=\"$(head -c 16"},
		"unchecked PR number": {"            ''|*[!0-9]*) echo", "            '') echo"},
		"unchecked head":      {`if [ "$head_sha" != "$HEAD_SHA" ]; then`, `if false; then`},
		"write contents":      {"permissions:\n  actions: read\n", "permissions:\n  actions: read\n  contents: write\n"},
		"any event":           {"github.event.workflow_run.event == 'pull_request' &&", ""},
		"edits the last":      {`gh api --method PATCH "repos/$REPO/issues/comments/$id"`, `gh pr comment "$pr" --edit-last --body-file x; gh api --method PATCH "repos/$REPO/issues/x"`},
		"no marker":           {`startswith(\"$marker\")`, `true`},
	}, func(s string) []string { return checkComment(parseEngineWorkflow(t, s), s) })
}

func TestEngineNightlyShardMatrixWithMerge(t *testing.T) {
	raw := readFile(t, "engine/github/reckon-nightly.yml")
	mutate(t, "reckon-nightly.yml", raw, map[string][2]string{
		"matrix misses a shard": {"shard: [1, 2]", "shard: [1]"},
		"shard not from matrix": {`--shard "$SHARD/$RECKON_SHARDS"`, `--shard "1/$RECKON_SHARDS"`},
		"merge skips red":       {"    needs: gate\n    if: ${{ !cancelled() }}\n", "    needs: gate\n"},
		"merge some shards":     {"shards/reckon-shard-*", "shards/reckon-shard-1"},
		"no require-baseline":   {"--out out $require $strict", "--out out $strict"},
		"require cleared":       {"strict=--strict require=--require-baseline\n", "strict=--strict require=--require-baseline\n          require=\"\"\n"},
		"no timeout":            {" $strict --timeout 210m", " $strict"},
		"no lock":               {".reckon/gpu-lock.sh --timeout 3600 -- .reckon/contain.py \\\n            ", ".reckon/contain.py \\\n            "},
		"strict always off":     {"          strict=--strict require=--require-baseline\n", "          strict=--strict require=--require-baseline\n          strict=\"\"\n"},
		"any bootstrap value":   {"            *) echo \"::error::RECKON_BOOTSTRAP=$RECKON_BOOTSTRAP: expected 1 or true (bootstrap) or empty, 0 or false\"; exit 2 ;;\n          esac\n          history", "          esac\n          history"},
		"no bootstrap switch":   {"  RECKON_BOOTSTRAP: ${{ vars.RECKON_BOOTSTRAP || inputs.bootstrap || '' }}\n", "  RECKON_BOOTSTRAP: \"\"\n"},
		"shard without history": {" --timeout 210m \"${history[@]}\"", " --timeout 210m"},
		"build not contained":   {"run: .reckon/contain.py .reckon/build-engine.sh . engines/main", "run: .reckon/build-engine.sh . engines/main"},
		"merge unverified":      {".reckon/reckon.sh .bin merge", ".bin/reckon merge"},
		"floating reckon":       {"RECKON_VERSION: v0.1.0", "RECKON_VERSION: latest"},
		"no history":            {".reckon/reckon.sh .bin history add --history", ".reckon/reckon.sh .bin history list --history"},
		"history skips red":     {"if: ${{ !cancelled() && hashFiles('out/results.json') != '' }}", "if: ${{ hashFiles('out/results.json') != '' }}"},
		"shards append":         {"history=(--history .history/history.db --history-readonly)", "history=(--history .history/history.db)"},
		"action by tag":         {"actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093 # v4.3.0", "actions/download-artifact@v4"},
	}, func(s string) []string { return checkShardMatrix(parseEngineWorkflow(t, s), s) })
}

// TestEngineExampleSpecsLoad: the specs the engine templates run are valid, and the pre-merge
// one is the A/B of two builds (configs with their own command) with relaunches.
func TestEngineExampleSpecsLoad(t *testing.T) {
	for _, p := range []string{"engine/examples/premerge.yaml", "engine/examples/nightly.yaml"} {
		s, err := spec.Load(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if p == "engine/examples/premerge.yaml" {
			m, _ := s.Resolved("main")
			pr, _ := s.Resolved("pr")
			w, _ := s.Workload("decode")
			if slices.Equal(m.Command, pr.Command) || w == nil || w.LaunchCount() < 3 {
				t.Errorf("%s: main %v and pr %v must be two builds, relaunched (launches >= 3)", p, m.Command, pr.Command)
			}
		}
	}
}

// trustedCI: the Buildkite and GitLab rules shared by both: reckon pinned, spec and baselines
// from the trusted base (git archive into trusted/), every gate --strict with a --timeout under
// the job's, sharded from the CI's parallel index, a merge over every shard's output.
func trustedCI(where, script string, env map[string]string, jobMinutes int, shardArg, urlVar string) []string {
	bad := checkInstall(where, script, env)
	if !strings.Contains(script, `git --git-dir "$trusted_git" archive FETCH_HEAD .reckon | tar -x -C trusted`) {
		bad = append(bad, where+": trusted/ is not filled from the fetched base branch")
	}
	bad = append(bad, checkTrustedFetch(where, script, urlVar)...)
	bad = append(bad, checkContainedBuilds(where, script)...)
	bad = append(bad, checkVerifiedReckon(where, script)...)
	bad = append(bad, checkStrictSwitch(where, script, true)...)
	for _, l := range strings.Split(script, "\n") {
		if strings.Contains(l, "install-reckon.sh") && !strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- ")), "trusted/.reckon/install-reckon.sh ") {
			bad = append(bad, where+": the install script does not come from trusted/ (the base branch): "+strings.TrimSpace(l))
		}
	}
	bad = append(bad, checkMergeBase(where, script)...)
	cmds := gateCommands(script)
	if len(cmds) == 0 {
		bad = append(bad, where+": no reckon gate command")
	}
	for _, cmd := range cmds {
		if !strings.Contains(cmd, `--spec "trusted/`) || !strings.Contains(cmd, "--baselines trusted/") {
			bad = append(bad, where+": spec and baselines are not read from trusted/ (the base branch)")
		}
		c := strings.Join(strings.Fields(cmd), " ")
		c = strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(c, "- "), "verify_trusted; "), "verify_trusted && ")
		if !strings.HasPrefix(c, "trusted/.reckon/gpu-lock.sh") {
			bad = append(bad, where+": the gate does not run under the base branch's GPU lock script")
		}
		if !strings.Contains(c, "trusted/.reckon/contain.py trusted/.reckon/reckon.sh trusted/.bin gate ") {
			bad = append(bad, where+": the gate does not run trusted/.reckon/reckon.sh under contain.py")
		}
		bad = append(bad, checkReadOnlyHistory(where, []string{c}, script)...)
		if !strings.Contains(cmd, shardArg) {
			bad = append(bad, where+": the gate is not sharded with "+shardArg)
		}
		bad = append(bad, checkGateCommand(where, cmd, jobMinutes)...)
	}
	return bad
}

// checkMergeBase: the PR's build is given the merge base of the PR with the target branch
// (git merge-base after a fetch of the target that is not shallow), not the target's tip: a
// PR is compared on what it changed, not on what the target branch did since it forked.
func checkMergeBase(where, script string) []string {
	var bad []string
	lines := strings.Split(script, "\n")
	mb := -1
	for i, l := range lines {
		if strings.Contains(l, "git merge-base FETCH_HEAD HEAD") && strings.Contains(l, "base_rev=") {
			mb = i
			break
		}
	}
	if mb < 0 {
		return []string{where + ": no base_rev=\"$(git merge-base FETCH_HEAD HEAD)\" for the PR's build"}
	}
	for i := mb - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "git fetch") {
			if strings.Contains(lines[i], "--depth") {
				bad = append(bad, where+": the target branch is fetched shallow before git merge-base (the merge base may be cut off)")
			}
			break
		}
	}
	var pr bool
	for _, l := range lines {
		// The calibration builds both sides from the default branch without a base; the
		// pull request's side is the one given the merge base.
		if strings.Contains(l, `build-engine.sh . engines/pr "$base_rev"`) {
			pr = true
		}
	}
	if !pr {
		bad = append(bad, where+": the PR's build is not given the merge base (build-engine.sh . engines/pr \"$base_rev\")")
	}
	return bad
}

func checkBuildkiteEngine(raw string) []string {
	var doc struct {
		Env   map[string]string `yaml:"env"`
		Steps []map[string]any  `yaml:"steps"`
	}
	if err := yaml.Unmarshal([]byte(raw), &doc); err != nil {
		return []string{err.Error()}
	}
	var bad []string
	var gate, merge map[string]any
	gateAt, mergeAt := -1, -1
	for i, s := range doc.Steps {
		switch s["key"] {
		case "reckon-gate":
			gate, gateAt = s, i
		case "reckon-merge":
			merge, mergeAt = s, i
		}
	}
	if gate == nil || merge == nil {
		return []string{"no reckon-gate or reckon-merge step"}
	}
	// Between them a wait that lets the merge run after a red shard.
	waits := 0
	for _, s := range doc.Steps[gateAt+1 : max(gateAt+1, mergeAt)] {
		if _, ok := s["wait"]; ok && fmt.Sprint(s["continue_on_failure"]) == "true" {
			waits++
		}
	}
	cmd := fmt.Sprint(gate["command"])
	minutes, _ := strconv.Atoi(fmt.Sprint(gate["timeout_in_minutes"]))
	bad = append(bad, trustedCI("buildkite gate", strings.ReplaceAll(cmd, "$$", "$"), doc.Env, minutes, `--shard "$shard/$BUILDKITE_PARALLEL_JOB_COUNT"`, "$BUILDKITE_REPO")...)
	if !strings.Contains(cmd, `shard="$$((BUILDKITE_PARALLEL_JOB + 1))"`) {
		bad = append(bad, "buildkite gate: the shard index is not BUILDKITE_PARALLEL_JOB + 1")
	}
	if p, _ := strconv.Atoi(fmt.Sprint(gate["parallelism"])); p < 2 {
		bad = append(bad, "buildkite gate: no parallelism to shard over")
	}
	if gate["concurrency"] != nil || gate["concurrency_group"] != nil {
		bad = append(bad, "buildkite gate: a concurrency limit allows one gate at a time across every GPU machine (the GPU lock is per machine)")
	}
	if !strings.Contains(cmd, `extra="--require-baseline"`) {
		bad = append(bad, "buildkite gate: the nightly does not pass --require-baseline")
	}
	// The calibration: a build that is not a pull request's, with RECKON_CALIBRATE=1, runs the
	// pre-merge spec with both sides from the default branch, without --strict.
	if !strings.Contains(cmd, `elif [ "$${RECKON_CALIBRATE:-}" = 1 ]; then`) || !strings.Contains(cmd, `mode=calibrate; RECKON_SPEC_FILE=premerge.yaml; extra=""`) ||
		!strings.Contains(cmd, "build-engine.sh . engines/pr || exit 3") {
		bad = append(bad, "buildkite gate: no calibration path (RECKON_CALIBRATE=1: the pre-merge spec, both sides from the default branch)")
	}
	mcmd := fmt.Sprint(merge["command"])
	bad = append(bad, checkVerifiedReckon("buildkite merge", mcmd)...)
	bad = append(bad, checkStrictSwitch("buildkite merge", strings.ReplaceAll(mcmd, "$$", "$"), true)...)
	if !strings.Contains(mcmd, `[ "$$mode" != premerge ] && [ -s out/results.json ]`) {
		bad = append(bad, "buildkite merge: a pull request's run could be appended to the history (only nightlies and calibrations are)")
	}
	// The agent runs a command with bash -e: a red gate or merge must not end the script before
	// the status is kept (the merge still annotates and appends the night).
	if !strings.Contains(cmd, " $$extra || status=$$?") || !strings.Contains(mcmd, " out out-* || status=$$?") {
		bad = append(bad, "buildkite: the gate's or merge's exit status is not kept (|| status=$$?): under the agent's bash -e a red run ends the step early")
	}
	if gateAt > mergeAt || waits == 0 {
		bad = append(bad, "buildkite: the merge does not follow the gate after a wait with continue_on_failure")
	}
	if !strings.Contains(mcmd, `buildkite-agent artifact download "out-*/**/*"`) || !regexp.MustCompile(`reckon(\.sh \S+)? merge `).MatchString(mcmd) || !strings.Contains(mcmd, " out out-*") {
		bad = append(bad, "buildkite merge: does not download and merge every shard")
	}
	for _, c := range []string{cmd, mcmd} {
		for _, line := range strings.Split(c, "\n") {
			if i := strings.Index(strings.ReplaceAll(line, "$$", ""), "$"); i >= 0 {
				bad = append(bad, fmt.Sprintf("buildkite: unescaped $ (substituted at upload time): %q", line))
			}
		}
	}
	return bad
}

func checkGitLabEngine(raw string) []string {
	type job struct {
		Extends   string            `yaml:"extends"`
		Tags      []string          `yaml:"tags"`
		Parallel  int               `yaml:"parallel"`
		Timeout   string            `yaml:"timeout"`
		Needs     []string          `yaml:"needs"`
		When      string            `yaml:"when"`
		Variables map[string]string `yaml:"variables"`
		Script    []any             `yaml:"script"`
		Rules     []struct {
			If        string            `yaml:"if"`
			When      string            `yaml:"when"`
			Variables map[string]string `yaml:"variables"`
		} `yaml:"rules"`
		ResourceGroup string `yaml:"resource_group"`
		Artifacts     struct {
			When    string            `yaml:"when"`
			Paths   []string          `yaml:"paths"`
			Reports map[string]string `yaml:"reports"`
		} `yaml:"artifacts"`
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(raw), &doc); err != nil {
		return []string{err.Error()}
	}
	get := func(name string) *job {
		b, err := yaml.Marshal(doc[name])
		if err != nil || doc[name] == nil {
			return nil
		}
		var j job
		if yaml.Unmarshal(b, &j) != nil {
			return nil
		}
		return &j
	}
	flat := func(xs []any) string {
		var parts []string
		var walk func(any)
		walk = func(x any) {
			if l, ok := x.([]any); ok {
				for _, y := range l {
					walk(y)
				}
				return
			}
			parts = append(parts, fmt.Sprint(x))
		}
		walk(xs)
		return strings.Join(parts, "\n")
	}
	var bad []string
	g, m, rules := get("reckon-gate"), get("reckon-merge"), get(".reckon-rules")
	if g == nil || m == nil || rules == nil {
		return []string{"no reckon-gate, reckon-merge or .reckon-rules"}
	}
	vars := map[string]string{}
	if v, ok := doc["variables"].(map[string]any); ok {
		for k, x := range v {
			vars[k] = fmt.Sprint(x)
		}
	}
	d, err := time.ParseDuration(g.Timeout)
	if err != nil {
		bad = append(bad, fmt.Sprintf("gitlab gate: timeout %q", g.Timeout))
	}
	bad = append(bad, trustedCI("gitlab gate", flat(g.Script), vars, int(d.Minutes()), `--shard "$CI_NODE_INDEX/$CI_NODE_TOTAL"`, "$CI_REPOSITORY_URL")...)
	if g.Parallel < 2 || !slices.Contains(g.Tags, "gpu") || g.Extends != ".reckon-rules" {
		bad = append(bad, fmt.Sprintf("gitlab gate: parallel %d tags %v extends %q", g.Parallel, g.Tags, g.Extends))
	}
	if g.Variables["GIT_DEPTH"] != "0" {
		bad = append(bad, fmt.Sprintf("gitlab gate: GIT_DEPTH %q: a shallow clone may not hold the MR's merge base (GIT_DEPTH: \"0\")", g.Variables["GIT_DEPTH"]))
	}
	if g.ResourceGroup != "" {
		bad = append(bad, "gitlab gate: a resource_group allows one gate at a time across every GPU machine (the GPU lock is per machine)")
	}
	var sched, mr bool
	for _, r := range rules.Rules {
		if strings.Contains(r.If, `"schedule"`) {
			sched = r.Variables["RECKON_EXTRA"] == "--require-baseline" && r.Variables["TRUSTED_REF"] == "$CI_DEFAULT_BRANCH"
		}
		if strings.Contains(r.If, "merge_request_event") && strings.Contains(r.If, "perf-gate") {
			mr = r.Variables["TRUSTED_REF"] == "$CI_MERGE_REQUEST_TARGET_BRANCH_NAME"
		}
	}
	if !sched || !mr {
		bad = append(bad, fmt.Sprintf("gitlab rules: nightly with --require-baseline from the default branch %v, labelled MRs trusting the target branch %v", sched, mr))
	}
	// The calibration schedule (RECKON_CALIBRATE == "1") comes before the nightly's schedule
	// rule (the first match wins), runs the pre-merge spec from the default branch.
	cal := len(rules.Rules) > 0 && strings.Contains(rules.Rules[0].If, `$RECKON_CALIBRATE == "1"`) && rules.Rules[0].Variables["RECKON_MODE"] == "calibrate" &&
		rules.Rules[0].Variables["RECKON_SPEC_FILE"] == "premerge.yaml" && rules.Rules[0].Variables["TRUSTED_REF"] == "$CI_DEFAULT_BRANCH"
	if !cal {
		bad = append(bad, "gitlab rules: no calibration rule (schedule with RECKON_CALIBRATE == \"1\": the pre-merge spec from the default branch) before the nightly's")
	}
	always := len(m.Rules) > 0
	for _, r := range m.Rules {
		always = always && r.When == "always"
	}
	mscript := flat(m.Script)
	if !slices.Contains(m.Needs, "reckon-gate") || !always || !regexp.MustCompile(`reckon(\.sh \S+)? merge `).MatchString(mscript) || !strings.Contains(mscript, " out out-*") {
		bad = append(bad, "gitlab merge: not run after every shard (red ones too) over every shard's output")
	}
	bad = append(bad, checkVerifiedReckon("gitlab merge", mscript)...)
	bad = append(bad, checkStrictSwitch("gitlab merge", mscript, true)...)
	if !strings.Contains(mscript, `if [ "$RECKON_MODE" != premerge ] && [ -s out/results.json ]; then`) {
		bad = append(bad, "gitlab merge: a merge request's run could be appended to the history (only nightlies and calibrations are)")
	}
	if m.Artifacts.Reports["junit"] != "out/junit.xml" || m.Artifacts.When != "always" {
		bad = append(bad, "gitlab merge: the merged junit.xml is not the JUnit report")
	}
	return bad
}

func TestEngineBuildkitePipeline(t *testing.T) {
	raw := readFile(t, "engine/buildkite/pipeline.yml")
	mutate(t, "engine/buildkite/pipeline.yml", raw, map[string][2]string{
		"spec from the PR":  {`--spec "trusted/.reckon/$$RECKON_SPEC_FILE" --baselines trusted/.reckon/baselines \`, `--spec ".reckon/$$RECKON_SPEC_FILE" --baselines .reckon/baselines \`},
		"not strict":        {`--out "out-$$shard" $$strict --timeout 220m`, `--out "out-$$shard" --timeout 220m`},
		"no timeout":        {` $$strict --timeout 220m "$${history_args[@]}"`, ` $$strict "$${history_args[@]}"`},
		"bootstrap for PRs": {`1 | true) if [ "$$mode" = nightly ]; then strict=""; extra=""; echo`, `1 | true) strict=""; extra=""; echo`},
		"trusted via job .git": {`GIT_CONFIG_GLOBAL=/dev/null git --git-dir "$$trusted_git" fetch -q --depth 1 "$$BUILDKITE_REPO" "refs/heads/$$base" || exit 3
      GIT_CONFIG_GLOBAL=/dev/null git --git-dir "$$trusted_git" archive FETCH_HEAD .reckon | tar -x -C trusted || exit 3`, `git fetch -q --depth 1 origin "$$base" || exit 3
      git archive FETCH_HEAD .reckon | tar -x -C trusted || exit 3`},
		"trusted after build": {`      trusted_sum="$$(tree_sum trusted)"
`, ``},
		"no check before use":    {`verify_trusted && trusted/.reckon/gpu-lock.sh`, `trusted/.reckon/gpu-lock.sh`},
		"build not contained":    {`trusted/.reckon/contain.py base-src/.reckon/build-engine.sh . engines/pr "$$base_rev" || exit 3`, `base-src/.reckon/build-engine.sh . engines/pr "$$base_rev" || exit 3`},
		"reckon unverified":      {`trusted/.reckon/reckon.sh trusted/.bin merge`, `trusted/.bin/reckon merge`},
		"shard appends":          {`history_args=(--history "$$RECKON_HISTORY_DSN" --history-readonly)`, `history_args=(--history "$$RECKON_HISTORY_DSN")`},
		"PR runs appended":       {`if [ "$$mode" != premerge ] && [ -s out/results.json ]`, `if [ -s out/results.json ]`},
		"timeout past the job's": {"timeout_in_minutes: 240", "timeout_in_minutes: 225"},
		"org-wide concurrency":   {"    parallelism: 2\n", "    parallelism: 2\n    concurrency: 1\n    concurrency_group: reckon/gpu\n"},
		"nightly unbaselined":    {`extra="--require-baseline"`, `extra=""`},
		"not sharded":            {"    parallelism: 2\n", "    parallelism: 1\n"},
		"merge stops on red":     {"  - wait: ~\n    continue_on_failure: true\n\n  - label: \":twisted", "  - wait: ~\n\n  - label: \":twisted"},
		"unpinned":               {"RECKON_VERSION: v0.1.0", "RECKON_VERSION: latest"},
		"unescaped":              {`--out "out-$$shard"`, `--out "out-$shard"`},
		"go install":             {`trusted/.reckon/install-reckon.sh "$$RECKON_VERSION" "$$RECKON_SHA256" trusted/.bin || exit 3`, `GOBIN="$$PWD/trusted/.bin" go install "github.com/reckon-ci/reckon/cmd/reckon@$${RECKON_VERSION}" || exit 3`},
		"no checksum":            {`RECKON_SHA256: "0000000000000000000000000000000000000000000000000000000000000000"`, `RECKON_SHA256: ""`},
		"install from the PR":    {`trusted/.reckon/install-reckon.sh "$$RECKON_VERSION"`, `.reckon/install-reckon.sh "$$RECKON_VERSION"`},
		"diff against base tip":  {`engines/pr "$$base_rev" || exit 3`, `engines/pr FETCH_HEAD || exit 3`},
		"no merge base":          {`base_rev="$$(git merge-base FETCH_HEAD HEAD)" || exit 3`, `base_rev=FETCH_HEAD`},
		"shallow base":           {`git fetch origin "$$base" || exit 3`, `git fetch --depth 1 origin "$$base" || exit 3`},
		"red gate exits early":   {`"$${history_args[@]}" $$extra || status=$$?`, `"$${history_args[@]}" $$extra`},
		"red merge exits early":  {" out out-* || status=$$?", " out out-*"},
	}, checkBuildkiteEngine)
}

func TestEngineGitLabPipeline(t *testing.T) {
	raw := readFile(t, "engine/gitlab/reckon.gitlab-ci.yml")
	mutate(t, "engine/gitlab/reckon.gitlab-ci.yml", raw, map[string][2]string{
		"spec from the MR":       {`--spec "trusted/.reckon/$RECKON_SPEC_FILE" --baselines trusted/.reckon/baselines --shard`, `--spec ".reckon/$RECKON_SPEC_FILE" --baselines .reckon/baselines --shard`},
		"trusts the MR's branch": {"        TRUSTED_REF: $CI_MERGE_REQUEST_TARGET_BRANCH_NAME\n        RECKON_HISTORY", "        TRUSTED_REF: $CI_MERGE_REQUEST_SOURCE_BRANCH_NAME\n        RECKON_HISTORY"},
		"not strict":             {` $strict --timeout 220m "${history_args[@]}"`, ` --timeout 220m "${history_args[@]}"`},
		"no timeout":             {` $strict --timeout 220m "${history_args[@]}"`, ` $strict "${history_args[@]}"`},
		"bootstrap for MRs":      {`1 | true) if [ "$RECKON_MODE" = nightly ]; then strict=""; RECKON_EXTRA=""; echo`, `1 | true) strict=""; RECKON_EXTRA=""; echo`},
		"trusted via job .git":   {`GIT_CONFIG_GLOBAL=/dev/null git --git-dir "$trusted_git" archive FETCH_HEAD .reckon | tar -x -C trusted`, `git archive FETCH_HEAD .reckon | tar -x -C trusted`},
		"trusted from origin":    {`fetch -q --depth 1 "$CI_REPOSITORY_URL" "refs/heads/$TRUSTED_REF"`, `fetch -q --depth 1 origin "refs/heads/$TRUSTED_REF"`},
		"no check before use":    {`    - verify_trusted; trusted/.reckon/gpu-lock.sh`, `    - trusted/.reckon/gpu-lock.sh`},
		"build not contained":    {`trusted/.reckon/contain.py base-src/.reckon/build-engine.sh . engines/pr "$base_rev"`, `base-src/.reckon/build-engine.sh . engines/pr "$base_rev"`},
		"gate unverified":        {`trusted/.reckon/contain.py trusted/.reckon/reckon.sh trusted/.bin gate`, `trusted/.reckon/contain.py trusted/.bin/reckon gate`},
		"shard appends":          {`history_args=(--history trusted/.history/history.db --history-readonly)`, `history_args=(--history trusted/.history/history.db)`},
		"no calibration": {`    - if: $CI_PIPELINE_SOURCE == "schedule" && $RECKON_CALIBRATE == "1"
      variables:
        RECKON_MODE: calibrate`, `    - if: $CI_PIPELINE_SOURCE == "web"
      variables:
        RECKON_MODE: calibrate`},
		"MR runs appended":         {`if [ "$RECKON_MODE" != premerge ] && [ -s out/results.json ]; then`, `if [ -s out/results.json ]; then`},
		"timeout past the job's":   {"  timeout: 4h\n", "  timeout: 3h30m\n"},
		"nightly unbaselined":      {"        RECKON_EXTRA: --require-baseline\n", "        RECKON_EXTRA: \"\"\n"},
		"one gate across machines": {"  parallel: 2\n", "  parallel: 2\n  resource_group: reckon-gpu\n"},
		"merge skips red":          {"      when: always\n      variables:\n        RECKON_MODE: nightly", "      variables:\n        RECKON_MODE: nightly"},
		"unpinned":                 {"RECKON_VERSION: v0.1.0", "RECKON_VERSION: latest"},
		"go install":               {`trusted/.reckon/install-reckon.sh "$RECKON_VERSION" "$RECKON_SHA256" trusted/.bin`, `GOBIN="$CI_PROJECT_DIR/trusted/.bin" go install "github.com/reckon-ci/reckon/cmd/reckon@${RECKON_VERSION}"`},
		"no checksum":              {`RECKON_SHA256: "0000000000000000000000000000000000000000000000000000000000000000"`, `RECKON_SHA256: ""`},
		"install from the MR":      {`  - trusted/.reckon/install-reckon.sh`, `  - .reckon/install-reckon.sh`},
		"diff against target tip":  {`engines/pr "$base_rev"`, `engines/pr FETCH_HEAD`},
		"no merge base":            {`base_rev="$(git merge-base FETCH_HEAD HEAD)"`, `base_rev=FETCH_HEAD`},
		"shallow target":           {"    - git fetch origin \"$TRUSTED_REF\"\n    - git worktree", "    - git fetch --depth 1 origin \"$TRUSTED_REF\"\n    - git worktree"},
		"shallow clone":            {`GIT_DEPTH: "0"`, `GIT_DEPTH: "20"`},
	}, checkGitLabEngine)
}

// The invariants of issue 34 (a pull request's build must not reach the trusted gate): builds
// run under contain.py (nothing they start outlives them), reckon runs only through reckon.sh
// (the binary checked against the pinned release archive right before each run), the strict
// switch clears --strict only for a bootstrap night or a calibration, and a store passed to a
// shard or a pull request's gate is read-only.
var (
	// directReckon is reckon run straight from an install directory, unverified.
	directReckon = regexp.MustCompile(`(^|[\s;&|(])\S*\.bin/reckon (gate|merge|spec|history|baseline|report)\b`)
	// wrappedReckon is reckon run through the verify-and-exec wrapper.
	wrappedReckon = regexp.MustCompile(`reckon\.sh "?\S*\.bin"? (gate|merge|spec|history|baseline|report)\b`)
)

// scriptLines returns a script's lines with shell continuations joined and comments dropped.
func scriptLines(script string) []string {
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(script, "\\\n", " "), "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			out = append(out, l)
		}
	}
	return out
}

// checkContainedBuilds: every run of build-engine.sh (the engine's build, which runs a pull
// request's code) goes through contain.py.
func checkContainedBuilds(where, script string) []string {
	var bad []string
	for _, l := range scriptLines(script) {
		i := strings.Index(l, "build-engine.sh ")
		if i < 0 {
			continue
		}
		if c := strings.Index(l, "contain.py "); c < 0 || c > i {
			bad = append(bad, where+": a build runs outside contain.py (a process it starts can outlive it and rewrite the trusted gate): "+strings.TrimSpace(l))
		}
	}
	return bad
}

// checkVerifiedReckon: reckon runs only through reckon.sh, never as .bin/reckon directly.
func checkVerifiedReckon(where, script string) []string {
	var bad []string
	for _, l := range scriptLines(script) {
		if directReckon.MatchString(l) {
			bad = append(bad, where+": reckon runs without reckon.sh (not verified against the pinned archive right before use): "+strings.TrimSpace(l))
		}
	}
	return bad
}

// checkStrictSwitch: a gate or merge passing $strict sets it to --strict, and clears it only on
// a bootstrap night (RECKON_BOOTSTRAP 1/true; in a template that also gates pull requests, only
// in nightly mode) or for a calibration; any other RECKON_BOOTSTRAP value is refused.
func checkStrictSwitch(where, script string, alsoPremerge bool) []string {
	if !regexp.MustCompile(`\$\$?strict\b`).MatchString(script) {
		return nil
	}
	var bad []string
	if !strings.Contains(script, "strict=--strict") {
		bad = append(bad, where+": $strict is not --strict by default")
	}
	refusals := regexp.MustCompile(`\*\) echo "[^"]*RECKON_BOOTSTRAP=[^"]*expected`).FindAllString(script, -1)
	if len(refusals) < strings.Count(script, "strict=--strict") {
		bad = append(bad, where+": RECKON_BOOTSTRAP values other than 1/true and empty/0/false are not refused")
	}
	var arms []string // case arms on their own (a folded YAML string holds a whole case on one line)
	for _, l := range scriptLines(script) {
		arms = append(arms, strings.Split(l, ";;")...)
	}
	for _, l := range arms {
		// --strict cleared, or the nightly's --require-baseline (require, extra, RECKON_EXTRA).
		if !regexp.MustCompile(`(^|[\s;(])(strict|require|extra|RECKON_EXTRA)=("")?(;|\s|$)`).MatchString(l) {
			continue
		}
		boot := strings.Contains(l, "1 | true)")
		cal := strings.Contains(l, "calibrate") || strings.Contains(l, "premerge")
		if boot && alsoPremerge && !strings.Contains(l, "= nightly") {
			bad = append(bad, where+": a bootstrap clears --strict for pull requests too: "+strings.TrimSpace(l))
		}
		if !boot && !cal {
			bad = append(bad, where+": --strict is cleared outside a bootstrap or calibration: "+strings.TrimSpace(l))
		}
	}
	return bad
}

// checkReadOnlyHistory: every gate that is given a history store is given it read-only (a shard
// or a pull request's run never appends; only the merged run is appended).
func checkReadOnlyHistory(where string, cmds []string, script string) []string {
	var bad []string
	for _, c := range cmds {
		hist := strings.Contains(c, "--history ") || strings.Contains(c, "history[@]}") || strings.Contains(c, "history_args[@]}")
		if !hist {
			bad = append(bad, where+": the gate is not given the history (its checks against history need it at judging time)")
			continue
		}
		if strings.Contains(c, "--history ") && !strings.Contains(c, "--history-readonly") {
			bad = append(bad, where+": the gate's history store is not read-only (a shard or a PR's run would append)")
		}
	}
	for _, l := range scriptLines(script) {
		if regexp.MustCompile(`(history|history_args)=\(--history `).MatchString(l) && !strings.Contains(l, "--history-readonly") {
			bad = append(bad, where+": a history store is given without --history-readonly: "+strings.TrimSpace(l))
		}
	}
	return bad
}

// checkTrustedFetch (GitLab, Buildkite): the trusted tree comes from the repository URL (urlVar)
// into a git directory of its own, before the first build, never through the job's .git after
// one; its digest is taken before the first build and compared (verify_trusted) on every line
// that runs reckon after a build.
func checkTrustedFetch(where, script, urlVar string) []string {
	var bad []string
	lines := scriptLines(script)
	firstBuild, fetched, summed := -1, -1, -1
	for i, l := range lines {
		if strings.Contains(l, "build-engine.sh ") && firstBuild < 0 {
			firstBuild = i
		}
		if strings.Contains(l, `--git-dir "$trusted_git" fetch`) && strings.Contains(l, `"`+urlVar+`"`) && fetched < 0 {
			fetched = i
		}
		if strings.Contains(l, `trusted_sum="$(tree_sum trusted)"`) && summed < 0 {
			summed = i
		}
		if strings.Contains(l, "git archive") && !strings.Contains(l, `--git-dir "$trusted_git" archive`) {
			bad = append(bad, where+": trusted/ is extracted through the job's own .git (the PR's build can rewrite remote.origin.url and FETCH_HEAD): "+strings.TrimSpace(l))
		}
	}
	if fetched < 0 {
		return append(bad, where+": trusted/ is not fetched from "+urlVar+" into a git directory of its own")
	}
	if firstBuild < 0 {
		return bad
	}
	if fetched > firstBuild || summed < 0 || summed > firstBuild {
		bad = append(bad, fmt.Sprintf("%s: trusted/ fetched (line %d) and its digest taken (line %d) not before the first build (line %d)", where, fetched, summed, firstBuild))
	}
	for _, l := range lines[firstBuild:] {
		t := strings.TrimSpace(l)
		if wrappedReckon.MatchString(t) && !strings.Contains(t, "verify_trusted") {
			bad = append(bad, where+": reckon runs after the build without verify_trusted on the same line: "+t)
		}
		if regexp.MustCompile(`git (fetch|archive|show|checkout)\b`).MatchString(t) {
			bad = append(bad, where+": git reads the job's .git after the build: "+t)
		}
	}
	return bad
}

// checkCalibrate: the pre-merge calibration runs only the default branch's code (schedule or
// workflow_dispatch, never a pull request), builds both sides from it, runs the pre-merge spec
// without --strict, and appends the run to the history from a job of its own that holds the
// only write permission and runs no engine code.
func checkCalibrate(wf *engineWorkflow, raw string) []string {
	var bad []string
	for ev := range wf.On {
		if ev != "schedule" && ev != "workflow_dispatch" {
			bad = append(bad, "triggered by "+ev+" (the calibration runs the default branch only: schedule, workflow_dispatch)")
		}
	}
	for k, v := range wf.Permissions {
		if v != "read" && v != "none" {
			bad = append(bad, fmt.Sprintf("workflow permission %s: %s (write only in the append job)", k, v))
		}
	}
	if secretRef.MatchString(raw) {
		bad = append(bad, "uses repository secrets")
	}
	env := map[string]string{}
	for k, v := range wf.Env {
		env[k] = v
	}
	bad = append(bad, checkInstall("calibrate", raw, env)...)
	bad = append(bad, checkActionPins(raw)...)
	bad = append(bad, checkVerifiedReckon("calibrate", raw)...)
	if env["RECKON_SPEC"] != ".reckon/premerge.yaml" {
		bad = append(bad, fmt.Sprintf("RECKON_SPEC %q: the calibration runs the pre-merge spec", env["RECKON_SPEC"]))
	}
	g, ok := wf.Jobs["gate"]
	if !ok {
		return append(bad, "no gate job")
	}
	var main, pr, gated bool
	for _, s := range g.Steps {
		bad = append(bad, checkContainedBuilds(fmt.Sprintf("gate step %q", s.Name), s.Run)...)
		if strings.HasPrefix(s.Uses, "actions/checkout@") && (s.With["ref"] != nil || fmt.Sprint(s.With["persist-credentials"]) != "false") {
			bad = append(bad, fmt.Sprintf("gate step %q: checks out something other than the default branch, or keeps credentials", s.Name))
		}
		main = main || strings.Contains(s.Run, "build-engine.sh . engines/main")
		pr = pr || strings.Contains(s.Run, "build-engine.sh . engines/pr")
		for _, cmd := range gateCommands(s.Run) {
			gated = true
			if strings.Contains(cmd, "--strict") || strings.Contains(cmd, "--history") {
				bad = append(bad, fmt.Sprintf("gate step %q: the calibration runs without --strict and appends nothing itself (the append job does)", s.Name))
			}
			ci := g.TimeoutMinutes
			if s.TimeoutMinutes > 0 {
				ci = min(ci, s.TimeoutMinutes)
			}
			if d, ok := gateTimeout(cmd); !ok || d > time.Duration(ci-10)*time.Minute {
				bad = append(bad, fmt.Sprintf("gate step %q: no --timeout 10 minutes under the CI's", s.Name))
			}
		}
	}
	if !main || !pr || !gated {
		bad = append(bad, fmt.Sprintf("gate job: both sides built from the default branch (main %v, pr %v), gate %v", main, pr, gated))
	}
	a, ok := wf.Jobs["append"]
	if !ok {
		return append(bad, "no append job")
	}
	var appended bool
	for _, s := range a.Steps {
		if strings.Contains(s.Run, "build-engine.sh") || gateRun.MatchString(s.Run) {
			bad = append(bad, fmt.Sprintf("append step %q: runs engine code in the job that can push", s.Name))
		}
		if regexp.MustCompile(`reckon\.sh \S+ history add`).MatchString(s.Run) && strings.Contains(s.Run, "push -q origin HEAD:refs/heads/reckon-history") {
			appended = true
		}
	}
	if fmt.Sprint(a.Needs) != "gate" || !appended {
		bad = append(bad, "append job: does not follow the gate and append the run to the history branch")
	}
	return bad
}

func TestEngineCalibrationIsTrustedAndAppended(t *testing.T) {
	raw := readFile(t, "engine/github/reckon-calibrate.yml")
	mutate(t, "reckon-calibrate.yml", raw, map[string][2]string{
		"on pull requests":    {"  workflow_dispatch:\n", "  workflow_dispatch:\n  pull_request:\n"},
		"write everywhere":    {"permissions:\n  contents: read\n", "permissions:\n  contents: write\n"},
		"strict":              {"--out out --timeout 150m", "--out out --strict --timeout 150m"},
		"appends in the gate": {"--out out --timeout 150m", "--out out --timeout 150m --history history.db"},
		"one side":            {"          .reckon/contain.py .reckon/build-engine.sh . engines/pr\n", ""},
		"build not contained": {"          .reckon/contain.py .reckon/build-engine.sh . engines/pr\n", "          .reckon/build-engine.sh . engines/pr\n"},
		"nightly spec":        {"RECKON_SPEC: .reckon/premerge.yaml", "RECKON_SPEC: .reckon/nightly.yaml"},
		"unverified reckon":   {".reckon/reckon.sh .bin history add", ".bin/reckon history add"},
		"no append":           {"git -C history push -q origin HEAD:refs/heads/reckon-history", "true"},
		"a PR's ref":          {"      - name: Check out (the default branch)\n        uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n        with:\n          persist-credentials: false", "      - name: Check out (the default branch)\n        uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n        with:\n          ref: refs/pull/1/merge\n          persist-credentials: false"},
	}, func(s string) []string { return checkCalibrate(parseEngineWorkflow(t, s), s) })
}
