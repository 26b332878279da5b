package gate

import (
	"fmt"
	"time"
)

// The results model: one gate run as the suites record it, results.json holds it (WriteResults,
// ReadResults) and the reporters render it. The run's own verdict (Run.Verdict, Run.ExitCode)
// is decided here, so that every report and the process exit agree.

// ResultsSchema is the value of Run.Schema written by this version of reckon.
const ResultsSchema = "reckon.results/v2"

// ResultsSchemaV1 is the previous results schema, which ReadResults still reads: its checks
// carried the verdict's name at "name" as now, a statistical check's outcome (regression,
// no_change, improvement) at "outcome" and a summary of its statistics (metric, base_median,
// head_median, ratio, ci_low, ci_high, p_value) instead of the whole result at "stat", and no
// category (ReadResults derives it, see DefaultCategory).
const ResultsSchemaV1 = "reckon.results/v1"

// Run is one gate run: the spec, the machine it ran on, every config launched and every check
// judged. It is the lossless content of results.json.
type Run struct {
	// Schema is "reckon.results/v2" (see ResultsSchema). WriteResults fills it when empty.
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
	AllReduce *AllReduceEvidence `json:"allreduce_evidence,omitempty"`
	// Trials holds one entry per throughput trial.
	Trials       []Trial `json:"trials,omitempty"`
	NumericsFile string  `json:"numerics_file,omitempty"`
	// GPUPeakMiB is the peak memory used per GPU during the run, in MiB.
	GPUPeakMiB []float64 `json:"gpu_peak_mib,omitempty"`
	// MeasurementErrors are the measurements of this config that failed (its numerics probe, a
	// workload's trials), each with its error: part of the config's evidence, which reckon merge
	// reads back instead of parsing the names of the measurement checks.
	MeasurementErrors []MeasurementError `json:"measurement_errors,omitempty"`
}

// MeasurementError is one measurement of a config that failed.
type MeasurementError struct {
	// Workload is the workload whose trials failed; "" for the numerics probe.
	Workload string `json:"workload,omitempty"`
	// Error is what went wrong, as the measurement's check reported it.
	Error string `json:"error"`
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

// Check is one judged check: one JUnit test case. It is the verdict (name, kind, config,
// outcome, category, comparison, message, details, metrics and, for a statistical check, the
// whole statistical result) with what the run adds to it: where the check stands, its status
// under the run's policy, the explanation of a failure and how long it took.
type Check struct {
	Verdict
	Labels []string `json:"labels,omitempty"`
	// Line is the check's line in the spec file (SpecPath); 0 when it has none (synthetic checks).
	Line int `json:"line,omitempty"`
	// Status is passed, failed, error or skipped (the JUnit outcome) under the run's policy
	// (Policy.Status). When empty it is derived from Outcome without a policy (EffectiveStatus).
	Status Status `json:"status"`
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

// Outcomes a run records besides the verdicts of the judges.
const (
	// OutcomeNotRun marks a check the run selected but never judged (interrupted, or its node
	// failed before judging).
	OutcomeNotRun Outcome = "not_run"
	// OutcomeDeferred marks a cross-config check a shard left to reckon merge: its configs ran on
	// other shards.
	OutcomeDeferred Outcome = "deferred"
	// OutcomePartial marks a check skipped under --allow-partial because the label filter
	// removed one of its inputs (another config's measurement).
	OutcomePartial Outcome = "partial"
)

// KindInterrupted is the kind of the synthetic check an interrupted run reports
// (Run.EffectiveChecks).
const KindInterrupted = "interrupted"

// ConfigNamed returns the named config of r, or nil.
func (r *Run) ConfigNamed(name string) *Config {
	for i := range r.Configs {
		if r.Configs[i].Name == name {
			return &r.Configs[i]
		}
	}
	return nil
}

// EffectiveStatus returns the check's status, derived from its outcome without a policy when
// Status is empty. An unknown status is treated as an error so that it can never pass silently.
func (c *Check) EffectiveStatus() Status {
	switch c.Status {
	case StatusPassed, StatusFailed, StatusError, StatusSkipped:
		return c.Status
	case "":
		o := c.Outcome
		switch so := StatOutcome(o); so {
		case Regression, Improvement, NoChange:
			o = so.Verdict() // a hand-written check may give the statistical decision
		}
		st, _ := Policy{}.Status(o)
		return st
	default:
		return StatusError
	}
}

// EffectiveCategory is the check's category: its own, or the one derived from its kind, outcome
// and status when it has none (results written before categories existed, hand-written checks).
func (c *Check) EffectiveCategory() Category {
	if c.Category != "" {
		return c.Category
	}
	st := c.EffectiveStatus()
	o := c.Outcome
	switch so := StatOutcome(o); so {
	case Regression, Improvement, NoChange:
		o = so.Verdict() // a hand-written check may give the statistical decision
	}
	if st == StatusFailed && o != Fail && o != Error {
		return CategoryPolicy // no_baseline, inconclusive or skipped, failed by --strict or --require-baseline
	}
	if st == StatusPassed || st == StatusSkipped {
		return ""
	}
	if st == StatusError && o != Error {
		o = Error // an unknown outcome or status reads as an error
	}
	return DefaultCategory(c.Kind, o)
}

// EffectiveChecks returns the run's checks plus the synthetic ones every report shows and the
// run's verdict counts: an infrastructure error for a config whose launch failed but that has no
// errored check, and one for an interrupted run.
func (r *Run) EffectiveChecks() []Check {
	out := make([]Check, 0, len(r.Checks)+2)
	out = append(out, r.Checks...)
	for i := range r.Configs {
		cfg := &r.Configs[i]
		if cfg.LaunchError == "" {
			continue
		}
		covered := false
		for j := range r.Checks {
			if r.Checks[j].Config == cfg.Name && r.Checks[j].EffectiveStatus() == StatusError {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, Check{Verdict: Verdict{Name: "launch", Kind: KindHealth, Config: cfg.Name, Outcome: Error,
				Category: CategoryInfrastructure, Message: cfg.Name + ": engine launch failed: " + cfg.LaunchError, Details: cfg.LaunchError}, Status: StatusError})
		}
	}
	if r.Interrupted {
		out = append(out, Check{Verdict: Verdict{Name: "run interrupted", Kind: KindInterrupted, Outcome: Error,
			Category: CategoryInterrupted, Message: r.interruptedMessage()}, Status: StatusError})
	}
	return out
}

// interruptedMessage is the message of the synthetic "run interrupted" check: what stopped the
// run and how many selected checks were never judged.
func (r *Run) interruptedMessage() string {
	notRun := 0
	for i := range r.Checks {
		if r.Checks[i].Outcome == OutcomeNotRun {
			notRun++
		}
	}
	why := ""
	if r.InterruptReason != "" {
		why = " (" + r.InterruptReason + ")"
	}
	return fmt.Sprintf("the run was interrupted%s before every check ran; %d selected checks were not run and the reports are partial", why, notRun)
}

// UndecidedChecks returns the skipped checks that decided nothing a gate should have decided: an
// inconclusive statistical verdict, a missing baseline, or a check whose inputs the label
// filter removed (--allow-partial). Headlines list them so that a green run says what it did not
// verify.
func UndecidedChecks(checks []Check) []*Check {
	var out []*Check
	for i := range checks {
		c := &checks[i]
		if c.EffectiveStatus() != StatusSkipped {
			continue
		}
		switch c.Outcome {
		case Inconclusive, NoBaseline, OutcomePartial:
			out = append(out, c)
		}
	}
	return out
}
