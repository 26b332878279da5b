// Package history is reckon's results store: every gate run (and every imported benchmark
// result) with its provenance, each config's engine report and every trial's metrics, in one
// schema with two backends, SQLite (an embedded file, the default) and PostgreSQL (for runners
// that share one history). Over each series (testbed, spec, config, workload, metric) it finds
// change points with E-divisive means and a t-test significance, hands the gate the runs since a
// series' last change point (`against: history`), and renders a trend page.
//
// Data flows one way: a gate's run (gate.Run, live or read from results.json) or an imported
// result file becomes the store's rows (RowsFromRun, RowsFromImport) and is appended; analysis
// reads series back. The package never starts an engine and never
// renders the gate's reports. See docs/history.md.
package history

import (
	"fmt"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/internal/domain"
)

// Sources of a stored run (Run.Source).
const (
	// SourceGate is a run appended from a gate's results.json.
	SourceGate = "gate"
	// SourceImport is a result file of another tool (vLLM, SGLang, AIPerf) or of reckon bench.
	SourceImport = "import"
)

// EngineWorkload is the Workload of the series made of engine-report values (kv_cache_tokens,
// kv_cache_gib, ...), which belong to a config, not to a workload.
const EngineWorkload = "engine"

// Rows is what the store holds of one run: its row of the runs table and the rows of configs,
// engine_values and trials that belong to it. It is not a second model of the run: gate.Run is
// the run, and RowsFromRun (or RowsFromImport, for another tool's result file) builds its rows.
type Rows struct {
	Run     RunRow      `json:"run"`
	Configs []ConfigRow `json:"configs,omitempty"`
	// Trials are in config order, then in the order the run measured them.
	Trials []TrialRow `json:"trials,omitempty"`
}

// RunRow is a run's row: its provenance and verdict.
type RunRow struct {
	// ID is the store's id, set by Append and by reads; 0 before.
	ID int64 `json:"id,omitempty"`
	// UID identifies the run's content so that appending the same run twice stores it once.
	// Append fills it from the provenance when empty.
	UID           string    `json:"uid"`
	Source        string    `json:"source"`
	StartedAt     time.Time `json:"started_at"`
	FinishedAt    time.Time `json:"finished_at"`
	GitCommit     string    `json:"git_commit"`
	Engine        string    `json:"engine"`
	EngineVersion string    `json:"engine_version"`
	ReckonVersion string    `json:"reckon_version"`
	TestbedKey    string    `json:"testbed_key"`
	// TestbedJSON is the testbed fingerprint as JSON ("{}" when unknown).
	TestbedJSON string `json:"testbed_json"`
	SpecName    string `json:"spec_name"`
	// SpecHash is the sha256 of the spec file ("" when it could not be read).
	SpecHash    string `json:"spec_hash"`
	LabelFilter string `json:"label_filter"`
	// Verdict is the run's verdict (PASS, FAIL, ...; "" for imports).
	Verdict string `json:"verdict"`
}

// ConfigRow is a config's row with its numeric engine values (the engine_values rows).
type ConfigRow struct {
	Name          string `json:"name"`
	EngineVersion string `json:"engine_version"`
	LaunchError   string `json:"launch_error"`
	// EngineJSON is the EngineReport as JSON ("{}" when none); EngineValues its numeric values.
	EngineJSON   string             `json:"engine_json"`
	EngineValues map[string]float64 `json:"engine_values,omitempty"`
}

// TrialRow is one trial of a config: its rows of the trials table, one per metric.
type TrialRow struct {
	Config   string `json:"config"`
	Workload string `json:"workload"`
	Index    int    `json:"index"`
	// Launch is the engine launch the trial ran in (gate.Trial.Launch).
	Launch  int                `json:"launch,omitempty"`
	Metrics map[string]float64 `json:"metrics"`
}

// TrialsOf returns the trials of config name, in order.
func (r *Rows) TrialsOf(name string) []TrialRow {
	var out []TrialRow
	for _, t := range r.Trials {
		if t.Config == name {
			out = append(out, t)
		}
	}
	return out
}

// Validate reports the fields that a stored run must have and r lacks, and the first
// config or trial that cannot be stored.
func (r *Rows) Validate() error {
	var missing []string
	if r.Run.StartedAt.IsZero() {
		missing = append(missing, "started_at (the run's time)")
	}
	if r.Run.TestbedKey == "" {
		missing = append(missing, "testbed_key")
	}
	if r.Run.SpecName == "" {
		missing = append(missing, "spec_name")
	}
	if len(missing) > 0 {
		return fmt.Errorf("history: run lacks %s", strings.Join(missing, ", "))
	}
	known := map[string]bool{}
	for i, c := range r.Configs {
		if c.Name == "" {
			return fmt.Errorf("history: configs[%d]: empty config name", i)
		}
		known[c.Name] = true
		for _, k := range sortedKeys(c.EngineValues) {
			if err := domain.Measured(c.EngineValues[k], true); err != nil {
				return fmt.Errorf("history: config %s: engine value %s: %w", c.Name, k, err)
			}
		}
	}
	for j, t := range r.Trials {
		if !known[t.Config] {
			return fmt.Errorf("history: trials[%d]: config %q is not among the run's configs", j, t.Config)
		}
		if t.Workload == "" {
			return fmt.Errorf("history: config %s: trials[%d]: empty workload name", t.Config, j)
		}
		for _, k := range sortedKeys(t.Metrics) {
			// Non-finite values are not stored (Append); an absurd finite one would be, and
			// would hide every change point of its series.
			if err := domain.Measured(t.Metrics[k], true); err != nil {
				return fmt.Errorf("history: config %s: trials[%d] (%s): metric %s: %w", t.Config, j, t.Workload, k, err)
			}
		}
	}
	return nil
}

// SeriesKey names one series: a metric of a config under a workload, on a testbed, for a spec.
// Engine-report values have Workload EngineWorkload.
type SeriesKey struct {
	Testbed  string `json:"testbed"`
	Spec     string `json:"spec"`
	Config   string `json:"config"`
	Workload string `json:"workload"`
	Metric   string `json:"metric"`
}

// String is "testbed/spec/config/workload/metric".
func (k SeriesKey) String() string {
	return k.Testbed + "/" + k.Spec + "/" + k.Config + "/" + k.Workload + "/" + k.Metric
}

// Point is one run's contribution to a series: the median over its trials (Value), and the
// trials themselves (Samples).
type Point struct {
	RunID     int64     `json:"run_id"`
	StartedAt time.Time `json:"started_at"`
	Commit    string    `json:"commit"`
	Value     float64   `json:"value"`
	Samples   []float64 `json:"samples"`
	// Launches holds each sample's engine launch (parallel to Samples; nil: one launch).
	Launches []int `json:"launches,omitempty"`
}

// LaunchGroups splits the point's samples by launch, in launch order: the unit of the
// between-launch variation (a run of one launch is one group).
func (p Point) LaunchGroups() [][]float64 {
	if len(p.Samples) == 0 {
		return nil
	}
	if len(p.Launches) != len(p.Samples) {
		return [][]float64{append([]float64(nil), p.Samples...)}
	}
	idx := map[int]int{}
	var out [][]float64
	for i, v := range p.Samples {
		l := p.Launches[i]
		j, ok := idx[l]
		if !ok {
			j = len(out)
			idx[l] = j
			out = append(out, nil)
		}
		out[j] = append(out[j], v)
	}
	return out
}

// Series is a series' points in run order (time, then id).
type Series struct {
	Key    SeriesKey `json:"key"`
	Points []Point   `json:"points"`
}

// Values returns the series' per-run values.
func (s *Series) Values() []float64 {
	out := make([]float64, len(s.Points))
	for i, p := range s.Points {
		out[i] = p.Value
	}
	return out
}

// Filter selects series; empty fields match everything.
type Filter struct {
	Testbed, Spec, Config, Workload, Metric string
}

func (f Filter) match(k SeriesKey) bool {
	return (f.Testbed == "" || f.Testbed == k.Testbed) && (f.Spec == "" || f.Spec == k.Spec) &&
		(f.Config == "" || f.Config == k.Config) && (f.Workload == "" || f.Workload == k.Workload) &&
		(f.Metric == "" || f.Metric == k.Metric)
}
