package history

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/gate"
)

// PeakGPUMemKey is the engine value that holds a config's peak GPU memory over its GPUs (MiB).
const PeakGPUMemKey = "peak_gpu_mem_mib"

// RowsFromRun builds the store's rows of a gate's run: its provenance and verdict, each config's
// engine report (as JSON, and its finite numbers as engine values, with the peak GPU memory
// over the config's GPUs) and every trial. specHash is the spec file's sha256 (SpecHash).
func RowsFromRun(r *gate.Run, specHash string) *Rows {
	tb := "{}"
	if len(r.Testbed) > 0 {
		if b, err := json.Marshal(r.Testbed); err == nil {
			tb = string(b)
		}
	}
	out := &Rows{Run: RunRow{
		Source: SourceGate, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, GitCommit: r.GitCommit,
		Engine: r.Engine, EngineVersion: r.EngineVersion, ReckonVersion: r.ReckonVersion, TestbedKey: r.TestbedKey,
		TestbedJSON: tb, SpecName: r.SpecName, SpecHash: specHash, LabelFilter: r.LabelFilter, Verdict: r.Verdict(),
	}}
	for _, c := range r.Configs {
		hc := ConfigRow{Name: c.Name, EngineVersion: c.EngineVersion, LaunchError: c.LaunchError, EngineJSON: "{}"}
		if len(c.Engine) > 0 {
			if b, err := json.Marshal(c.Engine); err == nil {
				hc.EngineJSON = string(b)
			}
			hc.EngineValues = map[string]float64{}
			for k, v := range c.Engine {
				if f, ok := v.(float64); ok && !math.IsNaN(f) && !math.IsInf(f, 0) {
					hc.EngineValues[k] = f
				}
			}
		}
		if len(c.GPUPeakMiB) > 0 {
			if hc.EngineValues == nil {
				hc.EngineValues = map[string]float64{}
			}
			peak := 0.0
			for _, p := range c.GPUPeakMiB {
				peak = math.Max(peak, p)
			}
			hc.EngineValues[PeakGPUMemKey] = peak
		}
		out.Configs = append(out.Configs, hc)
		for _, t := range c.Trials {
			out.Trials = append(out.Trials, TrialRow{Config: c.Name, Workload: t.Workload, Index: t.Index, Launch: t.Launch, Metrics: t.Metrics})
		}
	}
	return out
}

// SpecHash is the sha256 of the file at path ("" when it cannot be read), the spec's identity
// in a stored run.
func SpecHash(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Imported is one result of another tool (vLLM, SGLang, AIPerf) or of reckon bench, as its file
// states it: the caller reads the file, RowsFromImport stores it as a run of one trial.
type Imported struct {
	// Path names the file in errors; Index is the result's place in it (the trial's index).
	Path  string
	Index int
	// What the file says ("" where it says nothing).
	Engine, Date, Testbed, Config, Workload, Commit string
	Metrics                                         map[string]float64
}

// ImportMeta is what the caller supplies for an imported result (`history add` flags); a field
// set here wins over the file.
type ImportMeta struct {
	Commit, When, Testbed, Spec, Config, Workload string
	// ReckonVersion is the version of the reckon storing the result.
	ReckonVersion string
}

// RowsFromImport builds the rows of one imported result: a run of one config and one trial. It
// fails, naming the flags to pass, when neither the file nor m says the run's time, testbed,
// spec, config or workload, and when the result has no metrics.
func RowsFromImport(in Imported, m ImportMeta) (*Rows, error) {
	pick := func(flag, fromFile string) string {
		if flag != "" {
			return flag
		}
		return fromFile
	}
	r := RunRow{Source: SourceImport, GitCommit: pick(m.Commit, in.Commit), Engine: in.Engine, ReckonVersion: m.ReckonVersion,
		TestbedKey: pick(m.Testbed, in.Testbed), SpecName: m.Spec, TestbedJSON: "{}"}
	when := pick(m.When, in.Date)
	var missing []string
	if when == "" {
		missing = append(missing, "--time (the file has no date)")
	} else {
		t, err := ParseWhen(when)
		if err != nil {
			return nil, fmt.Errorf("%s: time %q: %w", in.Path, when, err)
		}
		r.StartedAt, r.FinishedAt = t, t
	}
	if r.TestbedKey == "" {
		missing = append(missing, "--testbed")
	}
	if r.SpecName == "" {
		missing = append(missing, "--spec")
	}
	cfg := pick(m.Config, in.Config)
	if cfg == "" {
		missing = append(missing, "--config")
	}
	wl := pick(m.Workload, in.Workload)
	if wl == "" {
		missing = append(missing, "--workload")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: the file does not say %s; pass them", in.Path, strings.Join(missing, ", "))
	}
	if len(in.Metrics) == 0 {
		return nil, fmt.Errorf("%s: no metrics to store", in.Path)
	}
	return &Rows{Run: r, Configs: []ConfigRow{{Name: cfg, EngineJSON: "{}"}},
		Trials: []TrialRow{{Config: cfg, Workload: wl, Index: in.Index, Metrics: in.Metrics}}}, nil
}

// ParseWhen reads RFC 3339, a date-time without zone (UTC), or a date.
func ParseWhen(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "20060102-150405", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, errors.New("expected RFC 3339 (2026-11-28T02:00:00Z), 2006-01-02 15:04:05 or 2006-01-02")
}
