// Package reporters renders one gate run as the four report formats reckon publishes:
//
//   - junit.xml: one <testsuite> per config, plus a "cross-config" suite for checks that span
//     configs; one <testcase> per check (read by every CI system);
//   - results.json: everything measured, lossless (Run serialised; ReadResults reads it back);
//   - summary.md: a Markdown summary for $GITHUB_STEP_SUMMARY and PR comments, failures first;
//   - report.html: a self-contained HTML report with inline SVG charts.
//
// The package renders; it never judges and never starts processes. Its input is a Run, which the
// suites fill from the gate's verdicts (see docs/reports.md for the mapping and every field).
package reporters

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/gate"
)

// Schema is the value of Run.Schema written by this version of the package.
const Schema = "reckon.results/v2"

// SchemaV1 is the previous results schema, which ReadResults still reads: its checks carried
// the verdict's name at "name" as now, a statistical check's outcome (regression, no_change,
// improvement) at "outcome" and a summary of its statistics (metric, base_median, head_median,
// ratio, ci_low, ci_high, p_value) instead of the whole result at "stat".
const SchemaV1 = "reckon.results/v1"

// Check statuses (Check.Status) are gate's: they decide the JUnit element of the test case.
const (
	StatusPassed  = gate.StatusPassed
	StatusFailed  = gate.StatusFailed
	StatusError   = gate.StatusError
	StatusSkipped = gate.StatusSkipped
)

// CrossConfig is the JUnit suite name and classname of checks whose Config is empty (checks that
// span configs and name none as their subject).
const CrossConfig = "cross-config"

// Run is one gate run: the spec, the machine it ran on, every config launched and every check
// judged. It is the lossless content of results.json.
type Run struct {
	// Schema is "reckon.results/v2" (see Schema). WriteJSON fills it when empty.
	Schema   string `json:"schema"`
	SpecName string `json:"spec_name"`
	SpecPath string `json:"spec_path,omitempty"`
	// SpecDigest identifies the spec's content (spec.Spec.Digest); reckon merge joins only shards
	// of one digest, the spec's it judges with.
	SpecDigest string `json:"spec_digest,omitempty"`
	// Engine is the engine kind of the spec: "sglang", "vllm" or "refengine".
	Engine string `json:"engine"`
	// Testbed is the testbed fingerprint as a JSON object (GPUs, topology, driver, ...).
	Testbed map[string]any `json:"testbed,omitempty"`
	// TestbedKey is the short key baselines are stored under.
	TestbedKey    string `json:"testbed_key,omitempty"`
	ReckonVersion string `json:"reckon_version,omitempty"`
	// GitCommit is the commit of the code under test; GitCommitSource says where it came from
	// ("--commit", "GITHUB_SHA", "BUILDKITE_COMMIT", "CI_COMMIT_SHA" or "git rev-parse HEAD").
	GitCommit       string `json:"git_commit,omitempty"`
	GitCommitSource string `json:"git_commit_source,omitempty"`
	// EngineVersion is the version the engine reported (its --version, /get_server_info or
	// /version), from the first config that answered; Config.EngineVersion has each config's.
	EngineVersion string    `json:"engine_version,omitempty"`
	StartedAt     time.Time `json:"started_at"`
	FinishedAt    time.Time `json:"finished_at"`
	// LabelFilter is the --label-filter the run selected its checks with ("" for all).
	LabelFilter string `json:"label_filter,omitempty"`
	// Strict is true under --strict: no_baseline, inconclusive and skipped checks whose inputs were
	// filtered out are failures (their Status says failed, their Outcome keeps why).
	Strict bool `json:"strict,omitempty"`
	// Interrupted is true when the run was stopped (SIGINT, SIGTERM or --timeout) before every
	// check ran: the reports are partial, every check not judged is listed with Outcome not_run,
	// and the run is red. InterruptReason says what stopped it.
	Interrupted     bool   `json:"interrupted,omitempty"`
	InterruptReason string `json:"interrupt_reason,omitempty"`
	// LaunchOrder is every engine launch of the run in the order it happened: one per config by
	// default; with a workload's launches > 1 the relaunches follow in their balanced interleaved
	// order (main pr pr main main pr).
	LaunchOrder []LaunchRecord `json:"launch_order,omitempty"`
	// Shard is set when the run was one shard of a spec (reckon gate --shard I/N).
	Shard *Shard `json:"shard,omitempty"`
	// MergedFrom lists the shard runs that reckon merge joined into this run.
	MergedFrom []MergedShard `json:"merged_from,omitempty"`
	Configs    []Config      `json:"configs"`
	Checks     []Check       `json:"checks"`
}

// LaunchRecord is one engine launch: which config, which of its launches, and what it ran.
type LaunchRecord struct {
	Config string `json:"config"`
	// Launch counts the config's launches from 1; Of is how many the spec asks for.
	Launch int `json:"launch"`
	Of     int `json:"of"`
	// Workloads are the workloads whose trials this launch ran (none: it ran only the checks of
	// the first launch, or nothing was measured).
	Workloads []string  `json:"workloads,omitempty"`
	LogPath   string    `json:"log_path,omitempty"`
	Error     string    `json:"error,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

// Shard says which part of a spec a run covered (reckon gate --shard Index/Count).
type Shard struct {
	Index int `json:"index"` // 1-based
	Count int `json:"count"`
	// By is how configs were spread: "group" (configs a cross-config check ties stay together)
	// or "config" (every config on its own; reckon merge judges the cross-config checks).
	By string `json:"by"`
	// Configs are the configs this shard ran, in spec order.
	Configs []string `json:"configs"`
	// Deferred names the cross-config checks left to reckon merge (their configs are split
	// over shards).
	Deferred []string `json:"deferred,omitempty"`
}

// MergedShard is one shard run joined by reckon merge.
type MergedShard struct {
	Dir        string   `json:"dir"`
	Index      int      `json:"index"`
	Count      int      `json:"count"`
	TestbedKey string   `json:"testbed_key,omitempty"`
	Configs    []string `json:"configs"`
	GitCommit  string   `json:"git_commit,omitempty"`
}

// Config is one launched configuration and what was measured on it.
type Config struct {
	Name string `json:"name"`
	// Launches counts engine launches of this config in the run (one by default; a workload's
	// launches asks for more).
	Launches int `json:"launches"`
	// LaunchError is the infrastructure error of a launch that failed ("" when it started).
	LaunchError string `json:"launch_error,omitempty"`
	// LogPath is where the engine's full log was saved; LogTail is its last lines.
	LogPath string   `json:"log_path,omitempty"`
	LogTail string   `json:"log_tail,omitempty"`
	Args    []string `json:"args,omitempty"`
	// EngineVersion is what the engine said its version is ("" when it could not be asked).
	EngineVersion string `json:"engine_version,omitempty"`
	// Artifacts are the files saved from a failed config's engine before it was stopped
	// (OUT/artifacts/CONFIG/: server_info.json, metrics.txt, nvidia-smi.txt).
	Artifacts []string `json:"artifacts,omitempty"`
	// Engine is the EngineReport as a JSON object: what the engine actually did, read from its
	// logs and endpoints. Keys the renderers use: kv_cache_tokens, kv_cache_gib, weights_gib,
	// cuda_graph_gib, available_gpu_mem_gib, allreduce; every other numeric "*_gib" key is shown
	// as a further memory-plan component (for example custom allreduce buffers).
	Engine map[string]any `json:"engine,omitempty"`
	// BaselineEngine is the EngineReport stored with this config's baseline, when there is one.
	// Explanations compare against it when a check judges against the baseline.
	BaselineEngine map[string]any `json:"baseline_engine,omitempty"`
	// AllReduce is the evidence of the allreduce the engine ran (profiled kernels, log,
	// /server_info), when a check needed it.
	AllReduce *gate.AllReduceEvidence `json:"allreduce_evidence,omitempty"`
	// Trials holds one entry per throughput trial.
	Trials       []Trial `json:"trials,omitempty"`
	NumericsFile string  `json:"numerics_file,omitempty"`
	// GPUPeakMiB is the peak memory used per GPU during the run, in MiB.
	GPUPeakMiB []float64 `json:"gpu_peak_mib,omitempty"`
}

// Trial is one complete benchmark run against a launched engine.
type Trial struct {
	Workload string `json:"workload"`
	Index    int    `json:"index"`
	// Launch is which launch of the config ran the trial (1-based; 0 in results written before
	// relaunches existed, meaning the only launch).
	Launch int `json:"launch,omitempty"`
	// Metrics uses vLLM's result keys: output_throughput, request_throughput,
	// total_token_throughput, median_ttft_ms, p90_ttft_ms, p99_ttft_ms, mean_tpot_ms, ...
	Metrics map[string]float64 `json:"metrics"`
}

// Check is one judged check: one JUnit test case. It is the gate's verdict (name, kind, config,
// outcome, message, details, metrics and, for a statistical check, the whole statistical result)
// with what the run adds to it: where the check stands, its status under the run's policy, the
// explanation of a failure and how long it took.
type Check struct {
	gate.Verdict
	// Against names the comparison config of a relative or equivalence check ("" when the check
	// judges against a stored baseline or nothing). Explanations use it.
	Against string   `json:"against,omitempty"`
	Labels  []string `json:"labels,omitempty"`
	// Line is the check's line in the spec file (SpecPath); 0 when it has none (synthetic checks).
	Line int `json:"line,omitempty"`
	// Status is passed, failed, error or skipped (the JUnit outcome) under the run's policy
	// (gate.Policy.Status). When empty it is derived from Outcome without a policy.
	Status gate.Status `json:"status"`
	// Explanation correlates metrics, e.g. "KV cache -91% (10.42 -> 0.90 GiB); custom AR buffers
	// 3.85 GiB". When empty, renderers compute one with Explain for failed checks.
	Explanation string        `json:"explanation,omitempty"`
	Duration    time.Duration `json:"duration_ns"`
	// Trend is the check's series in the results history when one is configured (reckon gate
	// --history): the median of each of the last runs, oldest first, this run last. report.html
	// draws it as a sparkline.
	Trend []float64 `json:"trend,omitempty"`
}

// Metric is the statistic a statistical check judges (a Trial metric key; "" for others).
func (c *Check) Metric() string {
	if c.Stat == nil {
		return ""
	}
	return c.Stat.Metric
}

// Outcomes the gate records besides the verdicts of package gate: not_run marks a check the run
// selected but never judged (interrupted, or its node failed before judging).
const OutcomeNotRun gate.Outcome = "not_run"

// Counts is the tally of check statuses in a run. The buckets are disjoint and sum to Total:
// Inconclusive, NoBaseline and NotRun are the skipped checks of those outcomes (under --strict
// the first two are failures and counted in Failed); Skipped holds the other skipped checks.
type Counts struct {
	Total, Passed, Failed, Errors, Inconclusive, NoBaseline, Skipped, NotRun int
}

// String is the closing line's tally, e.g. "12 passed, 1 failed, 0 errors, 1 inconclusive,
// 0 no baseline, 2 skipped, 0 not run".
func (c Counts) String() string {
	return fmt.Sprintf("%d passed, %d failed, %s, %d inconclusive, %d no baseline, %d skipped, %d not run",
		c.Passed, c.Failed, plural(c.Errors, "error"), c.Inconclusive, c.NoBaseline, c.Skipped, c.NotRun)
}

// Count tallies r's checks by (normalised) status, including the synthetic error checks every
// report adds for an interrupted run and for a failed launch that no check reports.
func (r *Run) Count() Counts {
	return countChecks(effectiveChecks(r))
}

func countChecks(checks []Check) Counts {
	var c Counts
	for i := range checks {
		c.Total++
		switch checkStatus(&checks[i]) {
		case StatusPassed:
			c.Passed++
		case StatusFailed:
			c.Failed++
		case StatusSkipped:
			switch checks[i].Outcome {
			case "inconclusive":
				c.Inconclusive++
			case "no_baseline":
				c.NoBaseline++
			case OutcomeNotRun:
				c.NotRun++
			default:
				c.Skipped++
			}
		default:
			c.Errors++
		}
	}
	return c
}

// Verdicts of a whole run (Run.Verdict), in the order they take precedence.
const (
	// VerdictInterrupted: the run was stopped before every check ran (red).
	VerdictInterrupted = "INTERRUPTED"
	// VerdictFail: at least one check failed (red).
	VerdictFail = "FAIL"
	// VerdictInfra: no check failed but some errored, e.g. an engine did not start (red).
	VerdictInfra = "INFRASTRUCTURE ERROR"
	// VerdictNothing: no check passed: nothing was verified (red).
	VerdictNothing = "NOTHING VERIFIED"
	// VerdictPass: every check judged passed or was skipped for a stated reason (green).
	VerdictPass = "PASS"
)

// Verdict is the run's one-word verdict, the same in the closing line, summary.md and
// report.html: a run is green (VerdictPass) only when it was not interrupted, no check failed
// or errored, and at least one check passed.
func (r *Run) Verdict() string {
	c := r.Count()
	switch {
	case r.Interrupted:
		return VerdictInterrupted
	case c.Failed > 0:
		return VerdictFail
	case c.Errors > 0:
		return VerdictInfra
	case c.Passed == 0:
		return VerdictNothing
	}
	return VerdictPass
}

// Green reports whether the run passes the gate (Verdict is VerdictPass).
func (r *Run) Green() bool {
	return r.Verdict() == VerdictPass
}

// checkStatus returns the check's status, derived from its gate outcome without a policy when
// Status is empty. An unknown status is treated as an error so that it can never pass silently.
func checkStatus(c *Check) gate.Status {
	switch c.Status {
	case StatusPassed, StatusFailed, StatusError, StatusSkipped:
		return c.Status
	case "":
		o := c.Outcome
		switch so := gate.StatOutcome(o); so {
		case gate.Regression, gate.Improvement, gate.NoChange:
			o = so.Verdict() // a hand-written check may give the statistical decision
		}
		st, _ := gate.Policy{}.Status(o)
		return st
	default:
		return StatusError
	}
}

// config returns the named config of r, or nil.
func (r *Run) config(name string) *Config {
	for i := range r.Configs {
		if r.Configs[i].Name == name {
			return &r.Configs[i]
		}
	}
	return nil
}

// undecided returns the skipped checks that decided nothing a gate should have decided: an
// inconclusive statistical verdict, a missing baseline, or a check whose inputs the label
// filter removed (--allow-partial). Headlines list them so that a green run says what it did not
// verify.
func undecided(checks []Check) []*Check {
	var out []*Check
	for i := range checks {
		c := &checks[i]
		if checkStatus(c) != StatusSkipped {
			continue
		}
		switch c.Outcome {
		case "inconclusive", "no_baseline", OutcomePartial:
			out = append(out, c)
		}
	}
	return out
}

// OutcomeDeferred marks a cross-config check a shard left to reckon merge: its configs ran on
// other shards.
const OutcomeDeferred gate.Outcome = "deferred"

// OutcomePartial marks a check skipped under --allow-partial because the label filter removed
// one of its inputs (another config's measurement).
const OutcomePartial gate.Outcome = "partial"

// provenance is what was tested, for headlines: the commit, the engine's version, reckon's.
func provenance(r *Run) [][2]string {
	var out [][2]string
	if r.GitCommit != "" {
		out = append(out, [2]string{"commit", shortCommit(r.GitCommit)})
	}
	if r.EngineVersion != "" {
		out = append(out, [2]string{"engine", r.EngineVersion})
	}
	if r.ReckonVersion != "" {
		out = append(out, [2]string{"reckon", r.ReckonVersion})
	}
	return out
}

func shortCommit(c string) string {
	head, dirty := strings.CutSuffix(c, "-dirty")
	if len(head) > 12 {
		head = head[:12]
	}
	if dirty {
		head += "-dirty"
	}
	return head
}

// The headline numbers of a statistical check, which the renderers show: the medians of the
// comparison and of this config, head/base and its confidence interval, and the p-value; nil
// for other checks and for a number the comparison did not compute (NaN).
func (c *Check) baseMedian() *float64 {
	return c.statField(func(s *gate.StatResult) *float64 { return &s.BaseMedian })
}
func (c *Check) headMedian() *float64 {
	return c.statField(func(s *gate.StatResult) *float64 { return &s.HeadMedian })
}
func (c *Check) ratio() *float64 {
	return c.statField(func(s *gate.StatResult) *float64 { return &s.Ratio })
}
func (c *Check) ciLow() *float64 {
	return c.statField(func(s *gate.StatResult) *float64 { return &s.CILow })
}
func (c *Check) ciHigh() *float64 {
	return c.statField(func(s *gate.StatResult) *float64 { return &s.CIHigh })
}
func (c *Check) pValue() *float64 {
	return c.statField(func(s *gate.StatResult) *float64 { return &s.PValue })
}

func (c *Check) statField(f func(*gate.StatResult) *float64) *float64 {
	if c.Stat == nil || math.IsNaN(*f(c.Stat)) {
		return nil // not a statistical check, or not computed
	}
	return f(c.Stat)
}

// outcomeText is the outcome as reports show it: a statistical check's own decision
// (regression, no_change, improvement, inconclusive), else the verdict's outcome.
func (c *Check) outcomeText() string {
	if c.Stat != nil && c.Stat.Outcome != "" {
		return string(c.Stat.Outcome)
	}
	return string(c.Outcome)
}
