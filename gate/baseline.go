package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reckon-ci/reckon/internal/atomicfile"
	"github.com/reckon-ci/reckon/internal/domain"
	"github.com/reckon-ci/reckon/internal/num"
	"github.com/reckon-ci/reckon/internal/safefile"
	"github.com/reckon-ci/reckon/internal/strictjson"
)

// BaselineSchema is the value of Baseline.Schema for this version of the format
// (docs/baselines.md).
const BaselineSchema = "reckon.baseline/v1"

// Baseline is the stored reference for one spec on one testbed:
// baselines/<testbed-key>/<spec-name>.json. It keeps every trial's value (not just a summary),
// so that statistical checks can compare distributions.
type Baseline struct {
	Schema     string           `json:"schema"`
	SpecName   string           `json:"spec_name"`
	TestbedKey string           `json:"testbed_key"`
	Testbed    map[string]any   `json:"testbed,omitempty"` // the full testbed fingerprint
	Provenance Provenance       `json:"provenance"`
	Configs    []BaselineConfig `json:"configs"`

	path string // where it was read from, for error messages
}

// Provenance records where a baseline came from.
type Provenance struct {
	RecordedAt    time.Time `json:"recorded_at"`
	GitCommit     string    `json:"git_commit,omitempty"`
	Engine        string    `json:"engine,omitempty"`
	EngineVersion string    `json:"engine_version,omitempty"`
	ReckonVersion string    `json:"reckon_version,omitempty"`
	// Source is the results file the baseline was recorded from.
	Source string `json:"source,omitempty"`
	// Note is free text, e.g. why the baseline was re-recorded.
	Note string `json:"note,omitempty"`
}

// BaselineConfig is one config's samples.
type BaselineConfig struct {
	Name string `json:"name"`
	// Engine is the EngineReport of the recorded run (KV cache, memory plan, allreduce), kept so
	// that reports can explain a later change against it.
	Engine    map[string]any     `json:"engine,omitempty"`
	Workloads []BaselineWorkload `json:"workloads"`
}

// BaselineWorkload is one workload's samples within a config.
type BaselineWorkload struct {
	Name string `json:"name"`
	// Definition optionally records the workload's parameters (dataset, lengths, concurrency).
	Definition map[string]any           `json:"definition,omitempty"`
	Metrics    map[string]MetricSamples `json:"metrics"`
}

// MetricSamples holds every trial's value of one metric. Median is written for reviewers and
// checked against the samples on load (a hand edit that breaks it is caught).
type MetricSamples struct {
	Samples []float64 `json:"samples"`
	// Launches holds, parallel to Samples, the launch (1-based) of the config that ran each
	// trial, when the recorded run relaunched its configs (a workload's launches > 1). Absent:
	// every sample is of one launch. A baseline with several launches measures the testbed's
	// between-launch variation, which every statistical verdict on its configs then uses.
	Launches []int   `json:"launches,omitempty"`
	Median   float64 `json:"median"`
	Unit     string  `json:"unit,omitempty"`
}

// NewMetricSamples returns samples with their median filled in.
func NewMetricSamples(samples []float64, unit string) MetricSamples {
	return MetricSamples{Samples: samples, Median: num.Median(samples), Unit: unit}
}

// NewLaunchSamples returns samples tagged with their launches (nil or all-one launches are
// dropped: one launch is the default).
func NewLaunchSamples(samples []float64, launches []int, unit string) MetricSamples {
	m := NewMetricSamples(samples, unit)
	for _, l := range launches {
		if l > 1 {
			m.Launches = launches
			break
		}
	}
	return m
}

// Groups returns the samples grouped by launch, in launch order (one group without launches).
func (m MetricSamples) Groups() [][]float64 {
	return GroupByLaunch(m.Samples, m.Launches)
}

// GroupByLaunch groups values by the launch of each (parallel slices; a missing or zero launch
// counts as launch 1), in launch order, leaving out launches without values.
func GroupByLaunch(values []float64, launches []int) [][]float64 {
	by := map[int][]float64{}
	maxL := 1
	for i, v := range values {
		l := 1
		if i < len(launches) && launches[i] > 0 {
			l = launches[i]
		}
		by[l] = append(by[l], v)
		maxL = max(maxL, l)
	}
	var out [][]float64
	for l := 1; l <= maxL; l++ {
		if len(by[l]) > 0 {
			out = append(out, by[l])
		}
	}
	return out
}

// Path returns the file the baseline was read from ("" for one built in memory).
func (b *Baseline) Path() string { return b.path }

// Config returns the named config, or nil.
func (b *Baseline) Config(name string) *BaselineConfig {
	for i := range b.Configs {
		if b.Configs[i].Name == name {
			return &b.Configs[i]
		}
	}
	return nil
}

// Samples returns the stored samples of metric for config and workload (nil when absent).
func (b *Baseline) Samples(config, workload, metric string) []float64 {
	c := b.Config(config)
	if c == nil {
		return nil
	}
	for _, w := range c.Workloads {
		if w.Name == workload {
			if m, ok := w.Metrics[metric]; ok {
				return append([]float64(nil), m.Samples...)
			}
		}
	}
	return nil
}

// LaunchGroups returns the stored samples of metric for config and workload grouped by launch
// (nil when absent).
func (b *Baseline) LaunchGroups(config, workload, metric string) [][]float64 {
	if m := b.metric(config, workload, metric); m != nil {
		return m.Groups()
	}
	return nil
}

func (b *Baseline) metric(config, workload, metric string) *MetricSamples {
	c := b.Config(config)
	if c == nil {
		return nil
	}
	for _, w := range c.Workloads {
		if w.Name == workload {
			if m, ok := w.Metrics[metric]; ok {
				return &m
			}
		}
	}
	return nil
}

// ErrNoBaseline is returned by LoadBaseline when no baseline is stored for the testbed and spec.
// It is its own outcome (NoBaseline), not an error of the run, unless the run requires one.
type ErrNoBaseline struct {
	TestbedKey string
	SpecName   string
	Path       string
}

func (e *ErrNoBaseline) Error() string {
	return fmt.Sprintf("no baseline for testbed %s (spec %s: %s does not exist); record one with reckon baseline record --from out/results.json",
		e.TestbedKey, e.SpecName, e.Path)
}

// IsNoBaseline reports whether err is (or wraps) an ErrNoBaseline.
func IsNoBaseline(err error) bool {
	var e *ErrNoBaseline
	return errors.As(err, &e)
}

// NoBaselineVerdict is the verdict of a check that had no baseline to compare with.
func NoBaselineVerdict(check, config, kind string, err error) Verdict {
	return Verdict{Name: check, Kind: kind, Config: config, Outcome: NoBaseline, Message: fmt.Sprintf("%s: %v", config, err)}
}

// ErrBaselineExists is returned (wrapped) by WriteBaseline when the file exists and force is
// false.
var ErrBaselineExists = errors.New("baseline already exists")

// BaselinePath returns dir/<testbedKey>/<specName>.json.
func BaselinePath(dir, testbedKey, specName string) string {
	return filepath.Join(dir, testbedKey, specName+".json")
}

// checkName rejects names that cannot be one path component.
func checkName(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, `/\`) || strings.ContainsRune(s, 0) {
		return fmt.Errorf("%s %q is not usable as a file name", what, s)
	}
	return nil
}

// LoadBaseline reads baselines/<testbedKey>/<specName>.json under dir. A missing file is an
// *ErrNoBaseline; a corrupt file, a schema mismatch or a baseline of another testbed or spec is an
// error naming the file and the field.
func LoadBaseline(dir, testbedKey, specName string) (*Baseline, error) {
	if err := checkName("testbed key", testbedKey); err != nil {
		return nil, err
	}
	if err := checkName("spec name", specName); err != nil {
		return nil, err
	}
	path := BaselinePath(dir, testbedKey, specName)
	b, err := ReadBaseline(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &ErrNoBaseline{TestbedKey: testbedKey, SpecName: specName, Path: path}
	}
	if err != nil {
		return nil, err
	}
	if b.TestbedKey != testbedKey {
		return nil, fmt.Errorf("%s: testbed_key is %q but the file is stored under testbed %q", path, b.TestbedKey, testbedKey)
	}
	if b.SpecName != specName {
		return nil, fmt.Errorf("%s: spec_name is %q but the file is named for spec %q", path, b.SpecName, specName)
	}
	return b, nil
}

// MaxBaselineBytes bounds the size of a baseline file.
const MaxBaselineBytes = 256 << 20

// ReadBaseline reads and validates one baseline file.
func ReadBaseline(path string) (*Baseline, error) {
	// A baseline comes from the repository, which a pull request can change: a FIFO there is
	// refused without blocking, and a file of gigabytes is not read.
	data, err := safefile.ReadNamed(path, MaxBaselineBytes)
	if err != nil {
		return nil, fmt.Errorf("reading baseline: %w", err)
	}
	b, err := DecodeBaseline(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b.path = path
	return b, nil
}

// DecodeBaseline parses and validates a baseline document. Unknown fields are errors (a
// misspelt field must not be silently dropped).
func DecodeBaseline(data []byte) (*Baseline, error) {
	var probe struct {
		Schema *string `json:"schema"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, jsonPosError(data, err)
	}
	if err := duplicateKeyError(data); err != nil {
		return nil, err
	}
	if probe.Schema == nil {
		return nil, fmt.Errorf("field schema: missing; expected %q", BaselineSchema)
	}
	if *probe.Schema != BaselineSchema {
		return nil, fmt.Errorf("field schema: %q; expected %q (written by another version of reckon?)", *probe.Schema, BaselineSchema)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var b Baseline
	if err := dec.Decode(&b); err != nil {
		return nil, jsonPosError(data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the baseline object")
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return &b, nil
}

// Validate checks the baseline's fields.
func (b *Baseline) Validate() error {
	if b.Schema != BaselineSchema {
		return fmt.Errorf("field schema: %q; expected %q", b.Schema, BaselineSchema)
	}
	if err := checkName("field spec_name:", b.SpecName); err != nil {
		return err
	}
	if err := checkName("field testbed_key:", b.TestbedKey); err != nil {
		return err
	}
	if b.Provenance.RecordedAt.IsZero() {
		return fmt.Errorf("field provenance.recorded_at: missing")
	}
	if len(b.Configs) == 0 {
		return fmt.Errorf("field configs: empty; a baseline needs at least one config")
	}
	seenC := map[string]bool{}
	for i, c := range b.Configs {
		fc := fmt.Sprintf("configs[%d]", i)
		if c.Name == "" {
			return fmt.Errorf("field %s.name: missing", fc)
		}
		if seenC[c.Name] {
			return fmt.Errorf("field %s.name: config %q appears twice", fc, c.Name)
		}
		seenC[c.Name] = true
		if len(c.Workloads) == 0 {
			return fmt.Errorf("field %s.workloads: empty (config %q)", fc, c.Name)
		}
		seenW := map[string]bool{}
		for j, w := range c.Workloads {
			fw := fmt.Sprintf("%s.workloads[%d]", fc, j)
			if w.Name == "" {
				return fmt.Errorf("field %s.name: missing", fw)
			}
			if seenW[w.Name] {
				return fmt.Errorf("field %s.name: workload %q appears twice in config %q", fw, w.Name, c.Name)
			}
			seenW[w.Name] = true
			if len(w.Metrics) == 0 {
				return fmt.Errorf("field %s.metrics: empty", fw)
			}
			for _, name := range sortedKeys(w.Metrics) {
				m := w.Metrics[name]
				fm := fmt.Sprintf("%s.metrics.%s", fw, name)
				if len(m.Samples) == 0 {
					return fmt.Errorf("field %s.samples: empty", fm)
				}
				for k, s := range m.Samples {
					if err := domain.Measured(s, false); err != nil {
						return fmt.Errorf("field %s.samples[%d]: %w", fm, k, err)
					}
				}
				if len(m.Launches) > 0 && len(m.Launches) != len(m.Samples) {
					return fmt.Errorf("field %s.launches: %d entries for %d samples; expected one launch per sample", fm, len(m.Launches), len(m.Samples))
				}
				for k, l := range m.Launches {
					if l < 1 {
						return fmt.Errorf("field %s.launches[%d]: %d; expected a launch number >= 1", fm, k, l)
					}
				}
				if med := num.Median(m.Samples); math.Abs(med-m.Median) > 1e-9*math.Max(1, math.Abs(med)) {
					return fmt.Errorf("field %s.median: %v but the median of the samples is %v (edited by hand?)", fm, m.Median, med)
				}
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// baselineLine is the line of byte offset off in data (strictjson's position rule).
func baselineLine(data []byte, off int64) int {
	line, _ := strictjson.LineCol(data, int(off))
	return line
}

// jsonPosError adds the line to JSON syntax and type errors.
func jsonPosError(data []byte, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
		if te.Field != "" {
			return fmt.Errorf("line %d: field %s: expected %s, got JSON %s", baselineLine(data, off), te.Field, te.Type, te.Value)
		}
	}
	if off >= 0 {
		return fmt.Errorf("line %d: %w", baselineLine(data, off), err)
	}
	return fmt.Errorf("invalid baseline: %w", err)
}

// Encode renders the baseline as indented JSON with configs in a stable order (metric keys are
// sorted by encoding/json), so that diffs in review are small.
func (b *Baseline) Encode() ([]byte, error) {
	c := *b
	c.Configs = append([]BaselineConfig(nil), b.Configs...)
	sort.SliceStable(c.Configs, func(i, j int) bool { return c.Configs[i].Name < c.Configs[j].Name })
	for i := range c.Configs {
		ws := append([]BaselineWorkload(nil), c.Configs[i].Workloads...)
		sort.SliceStable(ws, func(a, b int) bool { return ws[a].Name < ws[b].Name })
		c.Configs[i].Workloads = ws
	}
	out, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding baseline: %w", err)
	}
	return append(out, '\n'), nil
}

// WriteBaseline writes b to path atomically (a temporary file in the same directory, synced,
// then renamed over path) while holding an exclusive lock on path's lock file, so concurrent
// writers never interleave. It refuses to replace an existing baseline unless force is set.
func WriteBaseline(path string, b *Baseline, force bool) error {
	return UpdateBaseline(path, func(old *Baseline) (*Baseline, error) {
		if old != nil && !force {
			return nil, fmt.Errorf("%s: %w; pass --force to replace it (review the change with reckon baseline diff first)", path, ErrBaselineExists)
		}
		return b, nil
	})
}

// MergeBaseline adds b's configs to the baseline at path (creating it if needed) under the lock:
// configs the file lacks are added; a config present in both is replaced only when force is set.
// Two runs that each measured different configs can record into one file without losing either.
func MergeBaseline(path string, b *Baseline, force bool) error {
	return UpdateBaseline(path, func(old *Baseline) (*Baseline, error) {
		if old == nil {
			return b, nil
		}
		if old.TestbedKey != b.TestbedKey || old.SpecName != b.SpecName {
			return nil, fmt.Errorf("%s holds testbed %q spec %q; cannot merge testbed %q spec %q into it",
				path, old.TestbedKey, old.SpecName, b.TestbedKey, b.SpecName)
		}
		merged := *old
		merged.Configs = append([]BaselineConfig(nil), old.Configs...)
		merged.Provenance = b.Provenance
		for _, c := range b.Configs {
			if existing := merged.Config(c.Name); existing != nil {
				if !force {
					return nil, fmt.Errorf("%s: config %q: %w; pass --force to replace it", path, c.Name, ErrBaselineExists)
				}
				*existing = c
				continue
			}
			merged.Configs = append(merged.Configs, c)
		}
		return &merged, nil
	})
}

// UpdateBaseline runs a read-modify-write of the baseline at path under an exclusive flock on
// "<dir>/.<file>.lock". update receives the current baseline (nil when there is none) and
// returns the one to write. A corrupt existing file is an error, never overwritten silently.
func UpdateBaseline(path string, update func(old *Baseline) (*Baseline, error)) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating baseline directory: %w", err)
	}
	lockPath := filepath.Join(dir, "."+filepath.Base(path)+".lock")
	lf, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("opening baseline lock: %w", err)
	}
	defer lf.Close()
	for {
		err = unix.Flock(int(lf.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("locking %s: %w", lockPath, err)
	}
	defer func() {
		if uerr := unix.Flock(int(lf.Fd()), unix.LOCK_UN); uerr != nil && err == nil {
			err = fmt.Errorf("unlocking %s: %w", lockPath, uerr)
		}
	}()

	var old *Baseline
	if _, statErr := os.Stat(path); statErr == nil {
		old, err = ReadBaseline(path)
		if err != nil {
			return fmt.Errorf("existing baseline is unreadable, not replacing it: %w", err)
		}
	} else if !errors.Is(statErr, fs.ErrNotExist) {
		return fmt.Errorf("checking baseline: %w", statErr)
	}
	nb, err := update(old)
	if err != nil {
		return err
	}
	if err := nb.Validate(); err != nil {
		return fmt.Errorf("refusing to write an invalid baseline to %s: %w", path, err)
	}
	data, err := nb.Encode()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data)
}

// BaselineChange is one line of a baseline diff.
type BaselineChange struct {
	Config    string  `json:"config"`
	Workload  string  `json:"workload"`
	Metric    string  `json:"metric"`
	Status    string  `json:"status"` // "added", "removed", "changed", "unchanged"
	OldMedian float64 `json:"old_median,omitempty"`
	NewMedian float64 `json:"new_median,omitempty"`
	OldN      int     `json:"old_n"`
	NewN      int     `json:"new_n"`
	// Change is NewMedian/OldMedian - 1 (0 when either side is missing or zero).
	Change float64 `json:"change"`
}

// DiffBaselines lists, per config, workload and metric, what replacing old with new would change.
// old may be nil (everything is added).
func DiffBaselines(old, nb *Baseline) []BaselineChange {
	type key struct{ c, w, m string }
	index := func(b *Baseline) map[key]MetricSamples {
		out := map[key]MetricSamples{}
		if b == nil {
			return out
		}
		for _, c := range b.Configs {
			for _, w := range c.Workloads {
				for m, s := range w.Metrics {
					out[key{c.Name, w.Name, m}] = s
				}
			}
		}
		return out
	}
	o, n := index(old), index(nb)
	keys := map[key]bool{}
	for k := range o {
		keys[k] = true
	}
	for k := range n {
		keys[k] = true
	}
	var out []BaselineChange
	for k := range keys {
		ch := BaselineChange{Config: k.c, Workload: k.w, Metric: k.m}
		oldS, inOld := o[k]
		newS, inNew := n[k]
		ch.OldN, ch.NewN = len(oldS.Samples), len(newS.Samples)
		ch.OldMedian, ch.NewMedian = oldS.Median, newS.Median
		switch {
		case !inOld:
			ch.Status = "added"
		case !inNew:
			ch.Status = "removed"
		default:
			if oldS.Median != 0 {
				ch.Change = newS.Median/oldS.Median - 1
			}
			ch.Status = "unchanged"
			if !equalFloats(oldS.Samples, newS.Samples) {
				ch.Status = "changed"
			}
		}
		out = append(out, ch)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Config != b.Config {
			return a.Config < b.Config
		}
		if a.Workload != b.Workload {
			return a.Workload < b.Workload
		}
		return a.Metric < b.Metric
	})
	return out
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
