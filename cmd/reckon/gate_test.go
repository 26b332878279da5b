package main

import (
	"context"
	"github.com/reckon-ci/reckon/spec"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

func TestGateExitCodeAndClosingLine(t *testing.T) {
	pass := gate.Check{Verdict: gate.Verdict{Name: "p"}, Status: gate.StatusPassed}
	fail := gate.Check{Verdict: gate.Verdict{Name: "f", Outcome: "regression"}, Status: gate.StatusFailed}
	infra := gate.Check{Verdict: gate.Verdict{Name: "e", Outcome: "error"}, Status: gate.StatusError}
	unverified := gate.Check{Verdict: gate.Verdict{Name: "u", Kind: string(spec.KindEquivalence), Outcome: "error", Category: gate.CategoryUnverified}, Status: gate.StatusError}
	for _, tc := range []struct {
		name    string
		run     gate.Run
		code    int
		closing string
	}{
		{"green", gate.Run{Checks: []gate.Check{pass}}, 0, "PASS: 1 passed, 0 failed, 0 errors, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run"},
		{"a check failed", gate.Run{Checks: []gate.Check{pass, fail, infra}}, 1, "FAIL: 1 passed, 1 failed, 1 error, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run"},
		{"infrastructure only", gate.Run{Checks: []gate.Check{pass, infra}}, 3, "INFRASTRUCTURE ERROR: 1 passed, 0 failed, 1 error, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run"},
		{"unverified: red, not infrastructure", gate.Run{Checks: []gate.Check{pass, unverified, infra}}, 1,
			"UNVERIFIED: 1 passed, 0 failed, 1 error, 1 unverified, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run"},
		{"nothing verified", gate.Run{}, 1, "NOTHING VERIFIED: 0 passed, 0 failed, 0 errors, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run"},
		{"interrupted", gate.Run{Interrupted: true, InterruptReason: "--timeout 1s elapsed", Checks: []gate.Check{pass}}, 1,
			"INTERRUPTED: 1 passed, 0 failed, 1 error, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run (interrupted: --timeout 1s elapsed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.run.ExitCode(); got != tc.code {
				t.Errorf("exit code %d, want %d", got, tc.code)
			}
			if got := closingLine(&tc.run); got != tc.closing {
				t.Errorf("closing line\n got %q\nwant %q", got, tc.closing)
			}
		})
	}
}

func TestResolveCommit(t *testing.T) {
	for _, v := range commitVars {
		t.Setenv(v, "")
	}
	ctx := context.Background()
	if c, src := resolveCommit(ctx, "abc1234", t.TempDir()); c != "abc1234" || src != "--commit" {
		t.Errorf("flag: %q from %q", c, src)
	}
	t.Setenv("BUILDKITE_COMMIT", "bbbbbbb")
	t.Setenv("CI_COMMIT_SHA", "ccccccc")
	if c, src := resolveCommit(ctx, "", t.TempDir()); c != "bbbbbbb" || src != "BUILDKITE_COMMIT" {
		t.Errorf("CI variable: %q from %q (BUILDKITE_COMMIT comes before CI_COMMIT_SHA)", c, src)
	}
	t.Setenv("BUILDKITE_COMMIT", "")
	t.Setenv("CI_COMMIT_SHA", "")
	if c, src := resolveCommit(ctx, "", t.TempDir()); c != "" || src != "" {
		t.Errorf("outside a repository: %q from %q, want nothing", c, src)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	run := func(args ...string) {
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("add", "f")
	run("commit", "-q", "-m", "one")
	c, src := resolveCommit(ctx, "", dir)
	if len(c) != 40 || src != "git rev-parse HEAD" {
		t.Errorf("git: %q from %q", c, src)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, _ := resolveCommit(ctx, "", dir); d != c+"-dirty" {
		t.Errorf("a modified working tree: %q, want %q", d, c+"-dirty")
	}
}

// TestSpecCheckRejectsWhatTheEngineDrops: `reckon spec check` rejects, at file:line:col, a floor
// on a value the engine kind never logs and a vLLM num_draft_tokens its flags cannot carry; the
// same spec with values that take effect is OK.
func TestSpecCheckRejectsWhatTheEngineDrops(t *testing.T) {
	bad := writeSpec(t, "bad.yaml", "name: s\nengine:\n  kind: vllm\n  model: m\n  tp_size: 2\nconfigs:\n  - name: a\n  - name: e\n    speculative: {algorithm: EAGLE3, draft_model: d, num_steps: 3, num_draft_tokens: 8}\nchecks:\n  - kind: floor\n    metric: available_gpu_mem_gib\n    max: 0.5\n")
	out, _, code := runSpecCmd(t, "check", bad)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s", code, out)
	}
	for _, want := range []string{
		bad + ":9:68: configs[1].speculative.num_draft_tokens: config e: num_draft_tokens 8 with num_steps 3",
		bad + ":12:13: checks[0].metric: vllm's logs never report available_gpu_mem_gib",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	good := writeSpec(t, "good.yaml", "name: s\nengine:\n  kind: vllm\n  model: m\n  tp_size: 2\nconfigs:\n  - name: a\n  - name: e\n    speculative: {algorithm: EAGLE3, draft_model: d, num_steps: 3, num_draft_tokens: 4}\nchecks:\n  - kind: floor\n    metric: kv_cache_gib\n    min: 0.5\n")
	if out, _, code := runSpecCmd(t, "check", good); code != 0 || !strings.Contains(out, "OK "+good) {
		t.Errorf("good spec: exit %d\n%s", code, out)
	}
}
