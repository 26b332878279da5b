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
	"strings"
	"time"
)

// Schema is the value of Run.Schema written by this version of the package.
const Schema = "reckon.results/v1"

// Check statuses (Check.Status). They decide the JUnit element of the test case.
const (
	StatusPassed  = "passed"
	StatusFailed  = "failed"
	StatusError   = "error"
	StatusSkipped = "skipped"
)

// Check kinds (Check.Kind) the renderers know about. Other kinds are rendered generically.
const (
	KindHealth         = "health"
	KindExpect         = "expect"
	KindFloor          = "floor"
	KindRelative       = "relative"
	KindEquivalence    = "equivalence"
	KindAllreduceProbe = "allreduce_probe"
	KindThroughput     = "throughput"
	KindLatency        = "latency"
)

// CrossConfig is the JUnit suite name and classname of checks whose Config is empty (checks that
// span configs and name none as their subject).
const CrossConfig = "cross-config"

// Run is one gate run: the spec, the machine it ran on, every config launched and every check
// judged. It is the lossless content of results.json.
type Run struct {
	// Schema is "reckon.results/v1" (see Schema). WriteJSON fills it when empty.
	Schema   string `json:"schema"`
	SpecName string `json:"spec_name"`
	SpecPath string `json:"spec_path,omitempty"`
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

// Check is one judged check: one JUnit test case.
type Check struct {
	Name string `json:"name"`
	// Kind: health, expect, floor, relative, equivalence, allreduce_probe, throughput, latency.
	Kind string `json:"kind"`
	// Config is the config the check is about; "" for checks that span configs.
	Config string `json:"config,omitempty"`
	// Against names the comparison config of a relative or equivalence check ("" when the check
	// judges against a stored baseline or nothing). Explanations use it.
	Against string   `json:"against,omitempty"`
	Labels  []string `json:"labels,omitempty"`
	// Line is the check's line in the spec file (SpecPath); 0 when it has none (synthetic checks).
	Line int `json:"line,omitempty"`
	// Status is passed, failed, error or skipped (the JUnit outcome). When empty it is derived
	// from Outcome.
	Status string `json:"status"`
	// Outcome is the gate's outcome: pass, fail, error, inconclusive, no_baseline, skip,
	// regression, improvement, no_change.
	Outcome string `json:"outcome,omitempty"`
	// Message is the one-line verdict.
	Message string `json:"message,omitempty"`
	// Details is multi-line: the reasoning, and the log tail for infrastructure errors.
	Details string `json:"details,omitempty"`
	// Explanation correlates metrics, e.g. "KV cache -91% (10.42 -> 0.90 GiB); custom AR buffers
	// 3.85 GiB". When empty, renderers compute one with Explain for failed checks.
	Explanation string `json:"explanation,omitempty"`
	// Metrics are the check's measured values (JUnit properties).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Metric is the statistic a statistical check judges (a Trial metric key).
	Metric string `json:"metric,omitempty"`
	// BaseMedian and HeadMedian are the medians of Metric for the comparison (baseline or other
	// config) and for this config; Ratio is head/base.
	BaseMedian *float64 `json:"base_median,omitempty"`
	HeadMedian *float64 `json:"head_median,omitempty"`
	Ratio      *float64 `json:"ratio,omitempty"`
	// CILow and CIHigh bound the confidence interval of Ratio (head/base).
	CILow    *float64      `json:"ci_low,omitempty"`
	CIHigh   *float64      `json:"ci_high,omitempty"`
	PValue   *float64      `json:"p_value,omitempty"`
	Duration time.Duration `json:"duration_ns"`
	// Trend is the check's series in the results history when one is configured (reckon gate
	// --history): the median of each of the last runs, oldest first, this run last. report.html
	// draws it as a sparkline.
	Trend []float64 `json:"trend,omitempty"`
}

// Outcomes the gate records besides the verdicts of package gate: not_run marks a check the run
// selected but never judged (interrupted, or its node failed before judging).
const OutcomeNotRun = "not_run"

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

// checkStatus returns the check's status, derived from its gate outcome when Status is empty.
// An unknown status is treated as an error so that it can never pass silently.
func checkStatus(c *Check) string {
	switch c.Status {
	case StatusPassed, StatusFailed, StatusError, StatusSkipped:
		return c.Status
	case "":
		switch c.Outcome {
		case "pass", "no_change", "improvement":
			return StatusPassed
		case "fail", "regression":
			return StatusFailed
		case "skip":
			return StatusSkipped
		case "inconclusive", "no_baseline":
			// A statistical check that could not decide neither passes nor fails the build
			// unless the gate said so in Status; show it as skipped with its reason.
			return StatusSkipped
		default:
			return StatusError
		}
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
const OutcomeDeferred = "deferred"

// OutcomePartial marks a check skipped under --allow-partial because the label filter removed
// one of its inputs (another config's measurement).
const OutcomePartial = "partial"

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
