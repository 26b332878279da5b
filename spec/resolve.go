package spec

import (
	"fmt"
	"slices"
	"sort"
)

// Launch is the effective launch settings of one config: the engine's base settings with the
// config's overrides applied. The suites hand it to the engine adapter.
type Launch struct {
	Config                 string       `json:"config"`                   // the config's name
	Kind                   string       `json:"kind"`                     // EngineSGLang or EngineVLLM
	EngineVersion          string       `json:"engine_version,omitempty"` // engine.version ("" = ask the engine)
	Command                []string     `json:"command,omitempty"`        // nil: the adapter's default command
	Model                  string       `json:"model"`
	TPSize                 int          `json:"tp_size"`                       // >= 1
	MemFractionStatic      *float64     `json:"mem_fraction_static,omitempty"` // nil: engine default
	CudaGraphMaxBS         *int         `json:"cuda_graph_max_bs,omitempty"`   // nil: engine default
	DisableCustomAllReduce bool         `json:"disable_custom_all_reduce"`
	Speculative            *Speculative `json:"speculative,omitempty"` // nil: no speculative decoding
	// Args is engine.args followed by the config's args.
	Args []string `json:"args"`
	// Env is engine.env merged with the config's env (the config wins).
	Env          map[string]string `json:"env"`
	ReadyTimeout Duration          `json:"ready_timeout"`
	StopGrace    Duration          `json:"stop_grace"`
	Expect       Expect            `json:"expect,omitzero"`
	Tags         []string          `json:"tags,omitempty"` // spec tags, then the config's (no duplicates)
}

// Config returns the config called name.
func (s *Spec) Config(name string) (*Config, bool) {
	for _, c := range s.Configs {
		if c.Name == name {
			return c, true
		}
	}
	return nil, false
}

// Workload returns the workload called name.
func (s *Spec) Workload(name string) (*Workload, bool) {
	for _, w := range s.Workloads {
		if w.Name == name {
			return w, true
		}
	}
	return nil, false
}

// Check returns the check called name.
func (s *Spec) Check(name string) (*Check, bool) {
	for _, c := range s.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return nil, false
}

// ConfigNames returns the config names in file order.
func (s *Spec) ConfigNames() []string {
	out := make([]string, len(s.Configs))
	for i, c := range s.Configs {
		out[i] = c.Name
	}
	return out
}

// Resolved returns the effective launch settings of the config called name.
func (s *Spec) Resolved(name string) (Launch, error) {
	c, ok := s.Config(name)
	if !ok {
		return Launch{}, fmt.Errorf("spec %s: no config %q", s.File, name)
	}
	e := s.Engine
	l := Launch{
		Config:                 c.Name,
		Kind:                   e.Kind,
		EngineVersion:          e.Version,
		Command:                append([]string(nil), e.Command...),
		Model:                  e.Model,
		TPSize:                 e.TPSize,
		MemFractionStatic:      e.MemFractionStatic,
		CudaGraphMaxBS:         e.CudaGraphMaxBS,
		DisableCustomAllReduce: e.DisableCustomAllReduce,
		Speculative:            c.Speculative,
		ReadyTimeout:           e.ReadyTimeout,
		StopGrace:              e.StopGrace,
		Expect:                 c.Expect,
		Tags:                   s.Labels(name),
	}
	if len(c.Command) > 0 {
		l.Command = append([]string(nil), c.Command...) // the config's own build replaces the engine's
	}
	if c.Model != "" {
		l.Model = c.Model
	}
	if len(l.Command) == 0 {
		l.Command = nil
	}
	if l.TPSize == 0 {
		l.TPSize = 1
	}
	if c.TPSize != nil {
		l.TPSize = *c.TPSize
	}
	if c.MemFractionStatic != nil {
		l.MemFractionStatic = c.MemFractionStatic
	}
	if c.CudaGraphMaxBS != nil {
		l.CudaGraphMaxBS = c.CudaGraphMaxBS
	}
	if c.DisableCustomAllReduce != nil {
		l.DisableCustomAllReduce = *c.DisableCustomAllReduce
	}
	l.Args = append(append([]string{}, e.Args...), c.Args...)
	l.Env = make(map[string]string, len(e.Env)+len(c.Env))
	for k, v := range e.Env {
		l.Env[k] = v
	}
	for k, v := range c.Env {
		l.Env[k] = v
	}
	return l, nil
}

// Labels returns the Ginkgo labels of a config: the spec's tags, then the config's, without
// duplicates.
func (s *Spec) Labels(config string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(tags []string) {
		for _, t := range tags {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	add(s.Tags)
	if c, ok := s.Config(config); ok {
		add(c.Tags)
	}
	return out
}

// ChecksFor returns the checks that judge the config called name alone (those of per-config
// scope that include it), in spec order. They can run as soon as that config's engine is up.
func (s *Spec) ChecksFor(name string) []*Check {
	var out []*Check
	for _, c := range s.Checks {
		if c.Scope() == ScopePerConfig && slices.Contains(c.ConfigNames(), name) {
			out = append(out, c)
		}
	}
	return out
}

// CrossChecks returns the checks judged once after every config (Scope ScopeCross): those that
// compare configs with each other or with what the run does not hold (a baseline, the history,
// a probe file), in spec order.
func (s *Spec) CrossChecks() []*Check {
	var out []*Check
	for _, c := range s.Checks {
		if c.Scope() == ScopeCross {
			out = append(out, c)
		}
	}
	return out
}

// ChecksOfKind returns the checks of the given kinds, in spec order.
func (s *Spec) ChecksOfKind(kinds ...CheckKind) []*Check {
	var out []*Check
	for _, c := range s.Checks {
		if slices.Contains(kinds, c.Kind) {
			out = append(out, c)
		}
	}
	return out
}

// StatisticalChecks returns the throughput and latency checks: the family that
// Holm-Bonferroni corrects over.
func (s *Spec) StatisticalChecks() []*Check {
	var out []*Check
	for _, c := range s.Checks {
		if c.IsStatistical() {
			out = append(out, c)
		}
	}
	return out
}

// NeedsNumerics reports whether the config called name must be probed for numerics (an
// equivalence check names it as base, head, twin or oracle).
func (s *Spec) NeedsNumerics(name string) bool {
	for _, c := range s.Checks {
		if p := c.Equivalence(); p != nil && p.Involves(name) {
			return true
		}
	}
	return false
}

// WorkloadsFor returns the workloads that the config called name must run, with the number of
// trials needed: every workload a statistical check names for it (as the judged config or the
// one compared against), a floor on a result metric judges for it, or whose configs list names
// it, in spec order. A config that none of these names runs none.
func (s *Spec) WorkloadsFor(name string) []*Workload {
	need := map[string]bool{}
	for _, c := range s.Checks {
		if c.Params == nil {
			continue
		}
		if w := c.Params.workloadFor(name); w != "" {
			need[w] = true
		}
	}
	for _, w := range s.Workloads {
		if slices.Contains(w.Configs, name) {
			need[w.Name] = true
		}
	}
	var out []*Workload
	for _, w := range s.Workloads {
		if need[w.Name] {
			out = append(out, w)
		}
	}
	return out
}

// MetricsFor returns, for a config and workload, the result metrics that statistical checks
// judge (sorted), so that the harness knows which metrics decide whether to add trials.
func (s *Spec) MetricsFor(config, workload string) []string {
	set := map[string]bool{}
	for _, c := range s.StatisticalChecks() {
		p := c.Stat()
		if p.Workload == workload && (p.Config == config || p.AgainstConfig == config) {
			set[p.Metric] = true
		}
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}
