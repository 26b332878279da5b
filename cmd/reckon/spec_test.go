package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/spec"
)

// runSpecCmd runs `reckon spec ARGS...` in-process on a freshly built command and returns stdout,
// stderr (with the error main would print) and the exit code main would use.
func runSpecCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return execCmd(t, newSpecCmd(), args...)
}

// fixtureSpecs is relative to the repository root: the tests that use it run there (inRepoRoot),
// as reckon does in CI, so that the paths inside the specs resolve.
const fixtureSpecs = "fixtures/specs"

// inRepoRoot makes the repository root the working directory for the rest of the test.
func inRepoRoot(t *testing.T) {
	t.Helper()
	t.Chdir("../..")
}

func writeSpec(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSpecCheckRegistered(t *testing.T) {
	c, _, err := rootCmd.Find([]string{"spec", "check"})
	if err != nil || c.Name() != "check" {
		t.Fatalf("reckon spec check is not registered: %v", err)
	}
}

func TestSpecCheckGoodSpecs(t *testing.T) {
	inRepoRoot(t)
	examples, _ := filepath.Glob(filepath.Join(fixtureSpecs, "examples", "*.yaml"))
	if len(examples) < 3 {
		t.Fatalf("found %d example specs", len(examples))
	}
	files := append([]string{filepath.Join(fixtureSpecs, "default.yaml")}, examples...)
	out, errs, code := runSpecCmd(t, append([]string{"check"}, files...)...)
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	for _, f := range files {
		if !strings.Contains(out, "OK "+f+": spec ") {
			t.Errorf("no OK line for %s in:\n%s", f, out)
		}
	}
	for _, want := range []string{
		"OK " + filepath.Join(fixtureSpecs, "default.yaml") + ": spec default, sglang tp 4, 6 configs, 1 workload, 16 checks (6 implied by expect)",
		": spec sglang-8gpu-nvlink, sglang tp 8, 6 configs, 1 workload, ",
		": spec vllm-4gpu, vllm tp 4, ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Run from the repository root, as in CI, every path the specs name exists (bin/refengine is
	// a build output, so default.yaml may warn about it alone).
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "warning") && !strings.Contains(l, "program bin/refengine") {
			t.Errorf("unexpected warning: %s", l)
		}
	}
}

func TestSpecCheckBadSpec(t *testing.T) {
	inRepoRoot(t)
	bad := filepath.Join(fixtureSpecs, "bad", "dangling-reference.yaml")
	good := filepath.Join(fixtureSpecs, "examples", "sglang-8gpu-pcie.yaml")
	out, errs, code := runSpecCmd(t, "check", bad, good)
	if code != 2 {
		t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	want := []string{
		bad + `:17:13: checks[0].config: names no config "custom_ar" (did you mean "custom-ar"? configs: nccl, custom-ar)`,
		bad + `:23:15: checks[1].workload: names no workload "prefill" (workloads: decode)`,
		bad + `:25:14: checks[1].against: names no config "NCCL" (did you mean "nccl"? configs: nccl, custom-ar)`,
		"OK " + good + ": spec sglang-8gpu-pcie",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// After the OK line, each config's command line (docs/spec.md).
	if len(lines) != len(want)+2 || !strings.HasPrefix(lines[len(want)], "  nccl: NCCL_DEBUG=WARN python3 -m sglang.launch_server ") ||
		!strings.HasPrefix(lines[len(want)+1], "  custom-ar: ") {
		t.Fatalf("got %d lines, want %d and the 2 configs' command lines:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, lines[i], w)
		}
	}
	if !strings.Contains(errs, "1 spec file invalid (of 2 checked)") {
		t.Errorf("stderr: %q", errs)
	}
	if strings.Contains(out, "OK "+bad) {
		t.Errorf("bad spec reported OK:\n%s", out)
	}
}

func TestSpecCheckEveryBadFixtureFails(t *testing.T) {
	inRepoRoot(t)
	bad, _ := filepath.Glob(filepath.Join(fixtureSpecs, "bad", "*.yaml"))
	if len(bad) == 0 {
		t.Skip("no bad fixtures")
	}
	for _, f := range bad {
		out, _, code := runSpecCmd(t, "check", f)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2", f, code)
		}
		if !strings.HasPrefix(out, f+":") || strings.Contains(out, "OK ") {
			t.Errorf("%s: output does not start with the file name or says OK:\n%s", f, out)
		}
	}
}

func TestSpecCheckUnreadableAndUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	out, errs, code := runSpecCmd(t, "check", missing)
	if code != 2 || !strings.Contains(out, missing+": read spec: open ") {
		t.Errorf("missing file: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if _, _, code := runSpecCmd(t, "check"); code != 2 {
		t.Errorf("no files: exit %d, want 2", code)
	}
}

// A spec that loads but that the engine adapter would refuse at launch is invalid too, with the
// config's line.
func TestSpecCheckAdapterRefusal(t *testing.T) {
	const body = `name: topk
engine: {kind: vllm, model: meta-llama/Llama-3.1-8B-Instruct, tp_size: 2}
configs:
  - name: nccl
    disable_custom_all_reduce: true
  - name: eagle-tree
    speculative: {algorithm: EAGLE3, draft_model: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, eagle_topk: 4, num_draft_tokens: 8}
`
	p := writeSpec(t, "topk.yaml", body)
	out, errs, code := runSpecCmd(t, "check", p)
	if code != 2 {
		t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	want := p + ":6: configs[1]: config eagle-tree cannot be launched: vllm: speculative: eagle topk 4"
	if !strings.Contains(out, want) {
		t.Errorf("output:\n%s\nwant prefix:\n%s", out, want)
	}
	// SGLang drafts trees: the same settings are fine there.
	p2 := writeSpec(t, "topk-sglang.yaml", strings.Replace(body, "kind: vllm", "kind: sglang", 1))
	if out, errs, code := runSpecCmd(t, "check", p2); code != 0 {
		t.Errorf("sglang: exit %d\n%s%s", code, out, errs)
	}
}

func TestSpecCheckWarnsMissingPaths(t *testing.T) {
	p := writeSpec(t, "paths.yaml", `name: paths
engine: {kind: sglang, command: [./no/such/engine], model: m, tp_size: 2}
configs: [{name: nccl, disable_custom_all_reduce: true}, {name: custom-ar}]
numerics: {prompts: no/such/prompts.jsonl}
checks:
  - {kind: equivalence, base: nccl, head: custom-ar}
`)
	out, errs, code := runSpecCmd(t, "check", p)
	if code != 0 {
		t.Fatalf("warnings must not fail the file: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		p + ":2:24: warning: engine.command[0]: program ./no/such/engine does not exist",
		p + ":4:12: warning: numerics.prompts: prompts file " + filepath.Join(filepath.Dir(p), "no/such/prompts.jsonl") + " does not exist (data files are relative to the spec file)",
		"OK " + p + ": spec paths",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSpecCheckJSON(t *testing.T) {
	inRepoRoot(t)
	f := filepath.Join(fixtureSpecs, "examples", "sglang-8gpu-pcie.yaml")
	out, errs, code := runSpecCmd(t, "check", "--json", f)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	var r struct {
		File  string `json:"file"`
		Valid bool   `json:"valid"`
		Spec  struct {
			Name   string `json:"name"`
			Engine struct {
				ReadyTimeout string `json:"ready_timeout"`
			} `json:"engine"`
			Checks []struct {
				Name     string `json:"name"`
				Implicit bool   `json:"implicit"`
			} `json:"checks"`
		} `json:"spec"`
		Launches []struct {
			Config      string   `json:"config"`
			Argv        []string `json:"argv"`
			Speculative *struct {
				Algorithm string `json:"algorithm"`
			} `json:"speculative"`
		} `json:"launches"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	if r.File != f || !r.Valid || r.Spec.Name != "sglang-8gpu-pcie" || r.Spec.Engine.ReadyTimeout != "30m0s" {
		t.Errorf("result: %+v", r)
	}
	names := map[string]bool{}
	for _, c := range r.Spec.Checks {
		names[c.Name] = true
	}
	for _, n := range []string{"custom allreduce is not slower than NCCL", "latency custom-ar interactive median_tpot_ms vs nccl", "expect nccl allreduce == nccl"} {
		if !names[n] {
			t.Errorf("no check %q in %v", n, names)
		}
	}
	if len(r.Launches) != 2 {
		t.Fatalf("launches: %+v", r.Launches)
	}
	argv := map[string]string{}
	for _, l := range r.Launches {
		argv[l.Config] = strings.Join(l.Argv, " ")
		if l.Speculative == nil || l.Speculative.Algorithm != "EAGLE3" {
			t.Errorf("config %s: speculative %+v (the x-eagle3 anchor is merged into both)", l.Config, l.Speculative)
		}
	}
	if !strings.Contains(argv["nccl"], "--tp-size 8 --disable-custom-all-reduce") || strings.Contains(argv["custom-ar"], "--disable-custom-all-reduce") {
		t.Errorf("argv:\n%s\n%s", argv["nccl"], argv["custom-ar"])
	}
	if !strings.HasPrefix(argv["custom-ar"], "python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct") ||
		!strings.Contains(argv["custom-ar"], "--speculative-algorithm EAGLE3 --speculative-draft-model-path lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B") {
		t.Errorf("custom-ar argv: %s", argv["custom-ar"])
	}
}

func TestSpecCheckJSONSeveralFilesAndErrors(t *testing.T) {
	inRepoRoot(t)
	bad := filepath.Join(fixtureSpecs, "bad", "wrong-type.yaml")
	good := filepath.Join(fixtureSpecs, "examples", "vllm-4gpu.yaml")
	out, errs, code := runSpecCmd(t, "check", "--json", good, bad)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errs)
	}
	var rs []struct {
		File   string `json:"file"`
		Valid  bool   `json:"valid"`
		Errors []struct {
			File    string `json:"file"`
			Line    int    `json:"line"`
			Column  int    `json:"column"`
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"errors"`
		Launches []struct {
			Config string   `json:"config"`
			Argv   []string `json:"argv"`
		} `json:"launches"`
	}
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, out)
	}
	if len(rs) != 2 || !rs[0].Valid || rs[1].Valid || len(rs[1].Errors) == 0 {
		t.Fatalf("results: %+v", rs)
	}
	for _, e := range rs[1].Errors {
		if e.File != bad || e.Line == 0 || e.Column == 0 || e.Message == "" {
			t.Errorf("error without position: %+v", e)
		}
	}
	var eagle string
	for _, l := range rs[0].Launches {
		if l.Config == "eagle3" {
			eagle = strings.Join(l.Argv, " ")
		}
	}
	if !strings.Contains(eagle, `vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 4`) ||
		!strings.Contains(eagle, `--speculative-config {"method":"eagle3","model":"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B","num_speculative_tokens":3}`) {
		t.Errorf("vLLM eagle3 argv: %s", eagle)
	}
}

// docCommandProblems finds every reckon command line in a Markdown text ("bin/reckon ..." or
// "`reckon ..."), and reports those whose subcommand or flags the real CLI does not have.
func docCommandProblems(text string) []string {
	var problems []string
	for _, line := range strings.Split(text, "\n") {
		for _, prefix := range []string{"bin/reckon ", "`reckon "} {
			rest := line
			for {
				i := strings.Index(rest, prefix)
				if i < 0 {
					break
				}
				rest = rest[i+len(prefix):]
				cmdline := rest
				if j := strings.IndexAny(cmdline, "`|#\\"); j >= 0 {
					cmdline = cmdline[:j]
				}
				if j := strings.Index(cmdline, "&&"); j >= 0 {
					cmdline = cmdline[:j]
				}
				fields := strings.Fields(cmdline)
				if len(fields) == 0 {
					continue
				}
				c, _, err := rootCmd.Find(fields)
				if err != nil || c == rootCmd {
					problems = append(problems, fmt.Sprintf("%q: no such command", strings.TrimSpace(cmdline)))
					continue
				}
				for _, f := range fields {
					switch {
					case strings.HasPrefix(f, "--"):
						name, _, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
						if c.Flags().Lookup(name) == nil && c.InheritedFlags().Lookup(name) == nil {
							problems = append(problems, fmt.Sprintf("%q: %s has no flag --%s", strings.TrimSpace(cmdline), c.CommandPath(), name))
						}
					case len(f) == 2 && f[0] == '-' && f[1] != '-':
						if c.Flags().ShorthandLookup(f[1:]) == nil {
							problems = append(problems, fmt.Sprintf("%q: %s has no flag %s", strings.TrimSpace(cmdline), c.CommandPath(), f))
						}
					}
				}
			}
		}
	}
	return problems
}

// TestSpecGPUMachinesDocCommands keeps docs/gpu-machines.md honest: every reckon command it shows
// must exist with the flags it uses.
func TestSpecGPUMachinesDocCommands(t *testing.T) {
	b, err := os.ReadFile("../../docs/gpu-machines.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if n := strings.Count(text, "bin/reckon "); n < 10 {
		t.Fatalf("found %d command lines in docs/gpu-machines.md; the scan is broken", n)
	}
	for _, p := range docCommandProblems(text) {
		t.Error(p)
	}
	// The checker itself must catch a wrong subcommand and wrong flags.
	bad := "```sh\nbin/reckon baseline record --form out/results.json\nbin/reckon gates --spec x\n```\nrun `reckon gate -x --spec s` now\n"
	if got := docCommandProblems(bad); len(got) != 3 {
		t.Errorf("checker found %d problems in a text with 3:\n%s", len(got), strings.Join(got, "\n"))
	}
}

func TestSpecCheckDirectory(t *testing.T) {
	inRepoRoot(t)
	out, errs, code := runSpecCmd(t, "check", filepath.Join(fixtureSpecs, "examples"))
	if code != 0 || strings.Count(out, "OK ") < 3 {
		t.Errorf("examples dir: exit %d\n%s%s", code, out, errs)
	}
	// fixtures/specs holds bad/ too: a directory is checked whole, so it is invalid.
	out, errs, code = runSpecCmd(t, "check", fixtureSpecs)
	if code != 2 || !strings.Contains(out, "OK "+filepath.Join(fixtureSpecs, "examples", "vllm-4gpu.yaml")) ||
		!strings.Contains(out, filepath.Join(fixtureSpecs, "bad", "bad-enum.yaml")+":3:9: engine.kind:") {
		t.Errorf("specs dir: exit %d\n%s%s", code, out, errs)
	}
	empty := t.TempDir()
	if _, errs, code := runSpecCmd(t, "check", empty); code != 2 || !strings.Contains(errs, "no .yaml or .yml files") {
		t.Errorf("empty dir: exit %d, %s", code, errs)
	}
}

// TestSpecCheckWarnsUncalibrated: an equivalence check with twin: none, and numerics without the
// under-load pass, are valid but warned about; a calibrated check is not, nor one whose twin
// reckon derives (shown on the OK line's next lines).
func TestSpecCheckWarnsUncalibrated(t *testing.T) {
	dir := t.TempDir()
	src := `name: u
engine: {kind: sglang, model: m, tp_size: 4}
configs: [{name: a, disable_custom_all_reduce: true}, {name: t, disable_custom_all_reduce: true, env: {NCCL_ALGO: Tree}}, {name: b}]
numerics: {prompts: p.jsonl, batch_size: 0}
checks:
  - {kind: equivalence, base: a, head: b, twin: none}
  - {kind: equivalence, name: calibrated, base: a, head: b, twin: t}
  - {kind: equivalence, name: derived, base: b, head: a}
`
	p := filepath.Join(dir, "u.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := runSpecCmd(t, "check", p)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	all := out + errs
	if !strings.Contains(all, p+":6: warning: check equivalence b vs a: uncalibrated (twin: none)") ||
		!strings.Contains(all, "numerics.batch_size: 0: the under-load pass is off") || strings.Contains(all, "check calibrated: uncalibrated") ||
		strings.Contains(all, "check derived: uncalibrated") || !strings.Contains(all, "  derived twin b-twin: b with disable_custom_all_reduce (NCCL, the reference allreduce)") {
		t.Errorf("warnings:\n%s", all)
	}
}

// TestSpecCheckDiagnosticsInFileOrder: errors and warnings come out together, in file order, in
// the text form (a full-text golden) and in --json's diagnostics, each with its code and field
// path; errors and warnings are also listed apart.
func TestSpecCheckDiagnosticsInFileOrder(t *testing.T) {
	const body = `name: order
engine: {kind: vllm, model: meta-llama/Llama-3.1-8B-Instruct, tp_size: 2}
configs:
  - name: nccl
    disable_custom_all_reduce: true
    command: [./no/such/vllm]
  - name: eagle-tree
    speculative: {algorithm: EAGLE3, draft_model: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, eagle_topk: 4, num_draft_tokens: 8}
workloads:
  - {name: w, dataset: no/such/data.jsonl, concurrency: 4, num_prompts: 64}
`
	p := writeSpec(t, "order.yaml", body)
	out, errs, code := runSpecCmd(t, "check", p)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errs)
	}
	want := p + ":4: warning: configs[0]: config nccl is used by no check and no workload: the gate would launch it and judge only that it started; add a check or an expect, or remove it\n" +
		p + ":6:5: warning: configs[0].command[0]: program ./no/such/vllm does not exist (programs are relative to where reckon runs)\n" +
		p + ":7: configs[1]: config eagle-tree cannot be launched: "
	if !strings.HasPrefix(out, want) {
		t.Errorf("output:\n%s\nwant prefix:\n%s", out, want)
	}
	wantLast := p + ":10: warning: workloads[0].dataset: dataset " + filepath.Join(filepath.Dir(p), "no/such/data.jsonl") + " does not exist (data files are relative to the spec file)\n"
	if !strings.HasSuffix(out, wantLast) {
		t.Errorf("output:\n%s\nwant suffix:\n%s", out, wantLast)
	}

	out, errs, code = runSpecCmd(t, "check", "--json", p)
	if code != 2 {
		t.Fatalf("--json: exit %d, want 2\n%s%s", code, out, errs)
	}
	type diagnostic struct {
		Severity, Code, Field string
		Line                  int
	}
	var r struct {
		Valid       bool
		Diagnostics []diagnostic
		Errors      []diagnostic
		Warnings    []diagnostic
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	wantDiags := []diagnostic{
		{"warning", "unused-config", "configs[0]", 4},
		{"warning", "missing-path", "configs[0].command[0]", 6},
		{"error", "unsupported", "configs[1]", 7},
		{"warning", "unused-config", "configs[1]", 7},
		{"warning", "missing-path", "workloads[0].dataset", 10},
	}
	if r.Valid || !reflect.DeepEqual(r.Diagnostics, wantDiags) || len(r.Errors) != 1 || len(r.Warnings) != 4 {
		t.Errorf("--json: valid %v\ndiagnostics %+v\nwant %+v\nerrors %+v\nwarnings %+v", r.Valid, r.Diagnostics, wantDiags, r.Errors, r.Warnings)
	}
}

// TestSpecCheckUnusedConfig: a config no check and no workload uses is warned about at its line;
// one a workload lists, or a floor on every config covers, is not.
func TestSpecCheckUnusedConfig(t *testing.T) {
	p := writeSpec(t, "unused.yaml", `name: u
engine: {kind: sglang, model: m, tp_size: 2}
configs:
  - name: a
  - name: b
  - name: c
workloads:
  - {name: w, configs: [c], concurrency: 4, num_prompts: 8, input_len: 8, output_len: 8}
checks:
  - {kind: expect, configs: [a], allreduce: custom}
`)
	out, errs, code := runSpecCmd(t, "check", p)
	if code != 0 {
		t.Fatalf("a warning must not fail the file: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, p+":5: warning: configs[1]: config b is used by no check and no workload") ||
		strings.Contains(out, "config a is used") || strings.Contains(out, "config c is used") {
		t.Errorf("unused-config warnings:\n%s", out)
	}
	// Each config's command line follows the OK line.
	if !strings.Contains(out, "\n  b: python3 -m sglang.launch_server --model-path m --tp-size 2") {
		t.Errorf("no command line for config b:\n%s", out)
	}
}

// TestSpecCheckErrorsHideNoWarning: a spec with errors still gets every warning of the rest of
// the file, and the later-stage errors (an engine refusal), all sorted by position (issue 33:
// spec check showed the first error only and hid every warning behind it).
func TestSpecCheckErrorsHideNoWarning(t *testing.T) {
	const body = `name: hidden
engine: {kind: sglang, command: [./no/such/engine], model: m, tp_size: 2, ready_timeout: 60x}
configs:
  - name: nccl
    disable_custom_all_reduce: true
    mem_fraction_static: 7
  - name: custom-ar
numerics: {prompts: no/such/prompts.jsonl}
workloads:
  - {name: w, dataset: no/such/data.jsonl, concurrency: 4, num_prompts: 64}
checks:
  - {kind: equivalence, base: nccl, head: custom-ar, twin: none}
  - {kind: floor, metric: kv_cache_gib, min: 1, tolerance: 3}
`
	p := writeSpec(t, "hidden.yaml", body)
	if _, err := spec.Load(p); err == nil {
		t.Fatal("the fixture must not load: it stands for a spec with errors")
	}
	out, errs, code := runSpecCmd(t, "check", p)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errs)
	}
	want := []string{
		p + ":2:24: warning: engine.command[0]: program ./no/such/engine does not exist",
		p + ":2:", // the ready_timeout error, on the same line
		p + ":6:",
		p + ":8:12: warning: numerics.prompts: prompts file ",
		p + ":10:", // warning: the dataset
		p + ":12: warning: check equivalence",
		p + ":13:",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	at := 0
	for _, w := range want {
		for at < len(lines) && !strings.HasPrefix(lines[at], w) {
			at++
		}
		if at == len(lines) {
			t.Errorf("output lacks %q (in this order):\n%s", w, out)
			break
		}
		at++
	}
	for _, l := range lines {
		if strings.Contains(l, "ready_timeout") && strings.Contains(l, "warning") {
			t.Errorf("a warning about a part that was cut: %s", l)
		}
	}
	if strings.Count(out, "60x") != 1 {
		t.Errorf("the error is reported %d times:\n%s", strings.Count(out, "60x"), out)
	}
}

// TestResolveSpecPathsMatchesLoad: partialSpec resolves data files as spec.Load does (its copy
// of spec/paths.go must not drift).
func TestResolveSpecPathsMatchesLoad(t *testing.T) {
	p := writeSpec(t, "paths.yaml", `name: paths
engine: {kind: sglang, model: m, tp_size: 2}
configs: [{name: nccl, disable_custom_all_reduce: true}, {name: custom-ar}]
numerics: {prompts: p/prompts.jsonl}
workloads:
  - {name: w, dataset: d/data.jsonl, concurrency: 4, num_prompts: 64}
checks:
  - {kind: equivalence, base: nccl, head: custom-ar}
  - {kind: allreduce_probe, file: probe.json}
`)
	loaded, err := spec.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := spec.Parse(data, p)
	if err != nil {
		t.Fatal(err)
	}
	parsed.ResolvePaths(p)
	if !reflect.DeepEqual(loaded, parsed) {
		t.Errorf("ResolvePaths after Parse differs from spec.Load:\nload  %+v\nparse %+v", loaded, parsed)
	}
}
