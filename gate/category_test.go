package gate

import (
	"errors"
	"fmt"
	"github.com/reckon-ci/reckon/spec"
	"testing"
)

// Each judge says what its verdict means: a regression, a broken invariant, an unverified check
// or an infrastructure error, and what it compared with.
func TestVerdictCategoryAndAgainst(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	headTrials := []float64{50, 51, 49, 50, 52, 48, 50, 51}
	baseTrials := []float64{100, 101, 99, 100, 102, 98, 100, 101}
	reg := Compare(baseTrials, headTrials, throughput(), StatOptions{})
	for _, tc := range []struct {
		name     string
		v        Verdict
		outcome  Outcome
		category Category
		against  string
	}{
		{"floor broken", Floor("kv", "kv_cache_gib", f(0.9), f(8), nil), Fail, CategoryBrokenInvariant, ""},
		{"floor unreported", Floor("kv", "kv_cache_gib", nil, f(8), nil), Error, CategoryUnverified, ""},
		{"floor holds", Floor("kv", "kv_cache_gib", f(10), f(8), nil), Pass, "", ""},
		{"relative vs config", Relative("kv", "kv_cache_tokens", f(1), f(10), "nccl", f(0.9), nil), Fail, CategoryRegression, "nccl"},
		{"relative unreported", Relative("kv", "kv_cache_tokens", nil, f(10), "nccl", f(0.9), nil), Error, CategoryUnverified, "nccl"},
		{"expect mismatch", ExpectEqual("ar", "allreduce", "nccl", "custom"), Fail, CategoryBrokenInvariant, ""},
		{"expect unverified", ExpectAllReduce("ar", &AllReduceEvidence{Effective: BackendUnknown}, "custom"), Error, CategoryUnverified, ""},
		{"throughput regression vs config", reg.Verdict("tput", "custom-ar", "nccl"), Fail, CategoryRegression, "nccl"},
		{"throughput vs baseline", reg.Verdict("tput", "custom-ar", "baseline"), Fail, CategoryRegression, "baseline"},
		{"equivalence without probes", Equivalence(EquivalenceProbes{}, EquivalenceCheck{}), Error, CategoryMeasurement, ""},
		{"launch failure (default)", Verdict{Kind: KindHealth, Outcome: Error}.Classified(), Error, CategoryInfrastructure, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.v.Outcome != tc.outcome || tc.v.Category != tc.category || tc.v.Against != tc.against {
				t.Errorf("outcome %s category %q against %q, want %s %q %q (%s)", tc.v.Outcome, tc.v.Category, tc.v.Against,
					tc.outcome, tc.category, tc.against, tc.v.Message)
			}
		})
	}
}

// An equivalence check that cannot tell its subject from its control is unverified, not an
// infrastructure error, however the caller wraps the error.
func TestEquivalenceExercisedIsUnverified(t *testing.T) {
	base := EquivalenceSide{Config: "nccl", Requested: "nccl"}
	head := EquivalenceSide{Config: "custom-ar", Requested: "custom"}
	err := EquivalenceExercised(base, head, nil)
	if err == nil {
		t.Fatal("no evidence for either side must not verify")
	}
	wrapped := fmt.Errorf("greedy equivalence: %w", err)
	if !errors.Is(wrapped, ErrUnverified) || CategoryOf(wrapped) != CategoryUnverified {
		t.Errorf("category of %v: %q", wrapped, CategoryOf(wrapped))
	}
	if CategoryOf(errors.New("engine did not start")) != CategoryInfrastructure || Unverified(nil) != nil {
		t.Error("a plain error is infrastructure; Unverified(nil) is nil")
	}
}

// Unverified checks are counted apart from errors and make the run red with exit 1;
// infrastructure errors alone make it exit 3; a policy failure is red.
func TestRunVerdictOfCategories(t *testing.T) {
	pass := Check{Verdict: Verdict{Name: "p", Outcome: Pass}, Status: StatusPassed}
	unv := Check{Verdict: Verdict{Name: "u", Kind: string(spec.KindExpect), Outcome: Error, Category: CategoryUnverified}, Status: StatusError}
	infra := Check{Verdict: Verdict{Name: "e", Kind: KindHealth, Outcome: Error}, Status: StatusError}
	meas := Check{Verdict: Verdict{Name: "m", Kind: KindMeasurement, Outcome: Error}, Status: StatusError}
	strict := Check{Verdict: Verdict{Name: "s", Kind: string(spec.KindThroughput), Outcome: NoBaseline}, Status: StatusFailed}
	for _, tc := range []struct {
		name    string
		checks  []Check
		verdict string
		code    int
	}{
		{"unverified", []Check{pass, unv}, RunUnverified, ExitRed},
		{"unverified before infrastructure", []Check{pass, unv, infra}, RunUnverified, ExitRed},
		{"infrastructure", []Check{pass, infra, meas}, RunInfra, ExitInfra},
		{"policy", []Check{pass, strict}, RunFail, ExitRed},
		{"green", []Check{pass}, RunPass, ExitGreen},
	} {
		r := Run{Checks: tc.checks}
		if r.Verdict() != tc.verdict || r.ExitCode() != tc.code {
			t.Errorf("%s: %s exit %d, want %s exit %d", tc.name, r.Verdict(), r.ExitCode(), tc.verdict, tc.code)
		}
	}
	c := (&Run{Checks: []Check{pass, unv, infra, meas}}).Count()
	if c.Unverified != 1 || c.Errors != 2 || c.String() != "1 passed, 0 failed, 2 errors, 1 unverified, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run" {
		t.Errorf("counts %+v: %s", c, c)
	}
	if got := strict.EffectiveCategory(); got != CategoryPolicy {
		t.Errorf("no_baseline failed by --strict: category %q", got)
	}
}

// A results file written before categories existed reads back with each check's category
// derived from its kind and outcome, as the run judged it then.
func TestReadResultsDerivesCategory(t *testing.T) {
	old := `{"schema": "reckon.results/v2", "spec_name": "s", "configs": [{"name": "a", "launches": 1}],
  "checks": [
    {"name": "tput", "kind": "throughput", "config": "a", "status": "failed", "outcome": "fail", "against": "b", "duration_ns": 0},
    {"name": "kv", "kind": "floor", "config": "a", "status": "failed", "outcome": "fail", "duration_ns": 0},
    {"name": "health", "kind": "health", "config": "a", "status": "error", "outcome": "error", "duration_ns": 0},
    {"name": "probe", "kind": "measurement", "config": "a", "status": "error", "outcome": "error", "duration_ns": 0},
    {"name": "nb", "kind": "throughput", "config": "a", "status": "failed", "outcome": "no_baseline", "duration_ns": 0},
    {"name": "ok", "kind": "floor", "config": "a", "status": "passed", "outcome": "pass", "duration_ns": 0}
  ]}`
	r, err := DecodeResults([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	want := []Category{CategoryRegression, CategoryBrokenInvariant, CategoryInfrastructure, CategoryMeasurement, CategoryPolicy, ""}
	for i, c := range r.Checks {
		if c.Category != want[i] {
			t.Errorf("%s: category %q, want %q", c.Name, c.Category, want[i])
		}
	}
	if r.Checks[0].Against != "b" {
		t.Errorf("against %q", r.Checks[0].Against)
	}
	if r.ExitCode() != ExitRed {
		t.Errorf("exit %d", r.ExitCode())
	}
}
