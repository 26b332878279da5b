package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/reckon-ci/reckon/internal/statdefault"
)

// CheckKind is the kind of a check.
type CheckKind string

// Check kinds. See docs/spec.md for each kind's fields, and each kind's Params type
// (check_*.go) for its Go form.
const (
	// KindFloor bounds an EngineReport metric of each of its configs (FloorParams).
	KindFloor CheckKind = "floor"
	// KindRelative bounds an EngineReport metric of a config relative to the same metric of
	// another config or of the baseline (RelativeParams).
	KindRelative CheckKind = "relative"
	// KindExpect requires what configs' engines actually did, e.g. the effective allreduce
	// backend (ExpectParams). One is implied by every configs[].expect.
	KindExpect CheckKind = "expect"
	// KindEquivalence compares the numerics probe outputs of a base and a head config
	// (EquivalenceParams).
	KindEquivalence CheckKind = "equivalence"
	// KindAllReduceProbe judges an op-level allreduce probe JSON file (AllReduceProbeParams).
	KindAllReduceProbe CheckKind = "allreduce_probe"
	// KindThroughput is a statistical verdict on a result metric of a config under a workload,
	// against the stored baseline, another config of the same run or the history (StatParams).
	KindThroughput CheckKind = "throughput"
	// KindLatency is KindThroughput under another name, for latency metrics (the metric, not the
	// kind, says which direction is better).
	KindLatency CheckKind = "latency"
)

// kindDef is what spec knows of one check kind: its name and how a check of it is read from the
// YAML mapping. Everything else about the kind (defaults that depend on other sections,
// validation across sections, the generated name, the scope, the configs it involves) is a
// method of the Params value decode returns.
type kindDef struct {
	kind CheckKind
	// decode reads and validates the kind's own fields from m (the check's mapping); s is the
	// spec read so far (its configs, workloads and numerics). It returns the kind's parameters,
	// never nil; problems are recorded on b and decoding goes on.
	decode func(b *builder, m *mapping, s *Spec) Params
}

// kindDefs is the registry of check kinds, in the order docs/spec.md describes them: a new kind
// is its Params type in check_KIND.go and one line here (plus its judge in gate and its runner
// in suites).
var kindDefs = []kindDef{
	{KindFloor, decodeFloor},
	{KindRelative, decodeRelative},
	{KindExpect, decodeExpect},
	{KindEquivalence, decodeEquivalence},
	{KindAllReduceProbe, decodeAllReduceProbe},
	{KindThroughput, decodeStat},
	{KindLatency, decodeStat},
	{KindErrorRate, decodeErrorRate},
}

// CheckKinds lists the kinds in the order docs/spec.md describes them.
var CheckKinds = kindNames()

func kindNames() []CheckKind {
	out := make([]CheckKind, len(kindDefs))
	for i, d := range kindDefs {
		out[i] = d.kind
	}
	return out
}

// kindDefOf returns the registry entry of kind.
func kindDefOf(kind CheckKind) (kindDef, bool) {
	i := slices.IndexFunc(kindDefs, func(d kindDef) bool { return d.kind == kind })
	if i < 0 {
		return kindDef{}, false
	}
	return kindDefs[i], true
}

// Scope says where a check is judged: the one definition of "per-config" and "cross-config"
// that spec, the runner's tree, sharding and reckon merge all read (Check.Scope).
type Scope int

const (
	// ScopePerConfig: judged in the container of each config the check names, from that one
	// launch (floor, expect).
	ScopePerConfig Scope = iota + 1
	// ScopeCross: judged once after every config of the run, because it compares configs with
	// each other or with what the run does not hold (a baseline, the history, a probe file).
	ScopeCross
)

// String returns "per-config" or "cross-config".
func (s Scope) String() string {
	switch s {
	case ScopePerConfig:
		return "per-config"
	case ScopeCross:
		return "cross-config"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// Params is what a check of one kind adds to the fields every check has: one type per kind
// (FloorParams, RelativeParams, ExpectParams, EquivalenceParams, AllReduceProbeParams,
// StatParams). Read it with Check's accessor of the kind (c.Floor(), c.Stat(), ...) or a type
// switch. Its unexported methods are the kind's steps of loading; only spec implements it.
type Params interface {
	// Scope is where a check of this kind is judged.
	Scope() Scope
	// ConfigNames returns the configs the check involves, its subject first, possibly with
	// duplicates (Check.ConfigNames removes them).
	ConfigNames() []string
	// link fills what depends on the rest of the spec once every reference is resolved
	// (defaults such as a floor's configs or an equivalence check's top_k) and validates what
	// needs other sections (a twin that launches like its base, a statistical check's power).
	link(l *linker, c *Check)
	// validate runs after the implied expect checks and derived twins exist: checks across
	// sections that need the whole spec (an expectation a config's settings contradict, a
	// goodput metric on a workload without SLOs).
	validate(l *linker, c *Check)
	// name is the check's generated name, stable while its fields do not change.
	name(kind CheckKind) string
	// workloadFor returns the workload the config called config must run for the check ("" for
	// none): what the kind needs measured (Spec.WorkloadsFor).
	workloadFor(config string) string
}

// Against values of a statistical check.
const (
	AgainstBaseline = "baseline"
	AgainstConfig   = "config"
	// AgainstHistory judges against the runs stored in the results history since the series'
	// last change point on this testbed (reckon gate --history; docs/history.md).
	AgainstHistory = "history"
)

// DefaultHistoryRuns is the fewest runs since the last change point that `against: history`
// needs (StatParams.HistoryRuns).
const DefaultHistoryRuns = 5

// OfBaseline as a relative check's Of compares the config's engine report with the one stored in
// this testbed's baseline for the same config.
const OfBaseline = "baseline"

// Defaults of a statistical check's optional fields; their home is internal/statdefault, which
// the gate's StatOptions read as well.
const (
	DefaultMinEffect = statdefault.MinEffect
	DefaultAlpha     = statdefault.Alpha
)

// Check is one verdict: the fields every check has, and its kind's parameters.
type Check struct {
	Kind CheckKind `json:"kind"`
	// Name is unique within the spec: the name given, or one generated from the parameters
	// (stable while they do not change), e.g. "floor kv_cache_tokens >= 10000".
	Name string `json:"name"`
	// Tags are extra Ginkgo labels for this check.
	Tags []string `json:"tags,omitempty"`
	// Implicit is true for expect checks generated from configs[].expect.
	Implicit bool `json:"implicit,omitempty"`
	// Line is the check's line in the spec file (the config's line for implicit checks).
	Line int `json:"line"`
	// Params are the kind's own fields: *FloorParams for KindFloor, *StatParams for
	// KindThroughput and KindLatency, ... (see the accessors below). In JSON they are flattened
	// into the check's object, as the YAML writes them.
	Params Params `json:"-"`
}

// Floor returns the parameters of a floor check (nil for another kind).
func (c *Check) Floor() *FloorParams { p, _ := c.Params.(*FloorParams); return p }

// Relative returns the parameters of a relative check (nil for another kind).
func (c *Check) Relative() *RelativeParams { p, _ := c.Params.(*RelativeParams); return p }

// Expectation returns the parameters of an expect check (nil for another kind).
func (c *Check) Expectation() *ExpectParams { p, _ := c.Params.(*ExpectParams); return p }

// Equivalence returns the parameters of an equivalence check (nil for another kind).
func (c *Check) Equivalence() *EquivalenceParams { p, _ := c.Params.(*EquivalenceParams); return p }

// Probe returns the parameters of an allreduce_probe check (nil for another kind).
func (c *Check) Probe() *AllReduceProbeParams { p, _ := c.Params.(*AllReduceProbeParams); return p }

// Stat returns the parameters of a statistical check, throughput or latency (nil for another
// kind).
func (c *Check) Stat() *StatParams { p, _ := c.Params.(*StatParams); return p }

// IsStatistical reports whether the check is a statistical verdict (throughput or latency).
func (c *Check) IsStatistical() bool { return c.Stat() != nil }

// IsResultFloor reports whether the check is a floor on a result metric (the median over a
// config's trials of its workload) rather than on an engine report value.
func (c *Check) IsResultFloor() bool { f := c.Floor(); return f != nil && f.Workload != "" }

// Scope is where the check is judged (its kind's Scope); 0 for a check without parameters.
func (c *Check) Scope() Scope {
	if c.Params == nil {
		return 0
	}
	return c.Params.Scope()
}

// ConfigNames returns the configs the check involves, without duplicates, in the order the
// check names them (for floors and expects, the order of their configs).
func (c *Check) ConfigNames() []string {
	if c.Params == nil {
		return nil
	}
	var out []string
	for _, n := range c.Params.ConfigNames() {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// generatedName builds a check's stable default name from its parameters.
func (c *Check) generatedName() string {
	if c.Params == nil {
		return string(c.Kind)
	}
	return c.Params.name(c.Kind)
}

// checkHead is the JSON form of the fields every check has.
type checkHead struct {
	Kind     CheckKind `json:"kind"`
	Name     string    `json:"name"`
	Tags     []string  `json:"tags,omitempty"`
	Implicit bool      `json:"implicit,omitempty"`
	Line     int       `json:"line"`
}

// MarshalJSON writes the check as one flat object: the common fields, then the kind's
// parameters with the field names of the YAML (what `reckon spec check --json` has always
// printed).
func (c Check) MarshalJSON() ([]byte, error) {
	head, err := json.Marshal(checkHead{c.Kind, c.Name, c.Tags, c.Implicit, c.Line})
	if err != nil {
		return nil, fmt.Errorf("check %q: %w", c.Name, err)
	}
	if c.Params == nil {
		return head, nil
	}
	params, err := json.Marshal(c.Params)
	if err != nil {
		return nil, fmt.Errorf("check %q: parameters: %w", c.Name, err)
	}
	params = bytes.TrimSpace(params)
	if len(params) <= 2 || params[0] != '{' { // "{}": nothing to add
		return head, nil
	}
	out := append(head[:len(head)-1:len(head)-1], ',')
	return append(out, params[1:]...), nil
}
