package spec

import (
	"fmt"
	"strings"
)

// ExpectParams are the fields of an expect check: what the engines of Configs must actually
// have done (today the effective allreduce backend), so that a config that silently fell back
// fails. One is implied by every configs[].expect (Check.Implicit).
type ExpectParams struct {
	// Configs are the configs whose engines must show the expectation, in spec order.
	Configs []string `json:"configs,omitempty"`
	// Expect is what the engine must have done.
	Expect Expect `json:"expect,omitzero"`
}

func decodeExpect(b *builder, m *mapping, _ *Spec) Params {
	p := &ExpectParams{}
	p.Configs = b.refList(m)
	if len(p.Configs) == 0 && !m.has("config") && !m.has("configs") {
		m.missing("configs", "the configs whose engine must show the expectation")
	}
	p.Expect = b.expect(m)
	if p.Expect.IsZero() && !m.has("allreduce") {
		m.missing("allreduce", "custom or nccl")
	}
	return p
}

// Scope: an expectation is judged on each config's own launch.
func (p *ExpectParams) Scope() Scope { return ScopePerConfig }

// ConfigNames returns the expect check's configs.
func (p *ExpectParams) ConfigNames() []string { return p.Configs }

func (p *ExpectParams) link(*linker, *Check) {}

// validate finds configs whose settings contradict the expectation (custom allreduce expected
// where it is disabled or cannot run).
func (p *ExpectParams) validate(l *linker, c *Check) {
	if p.Expect.AllReduce != AllReduceCustom {
		return
	}
	for _, name := range p.Configs {
		r, err := l.s.Resolved(name)
		if err != nil {
			continue
		}
		why := ""
		switch {
		case r.DisableCustomAllReduce:
			why = "disable_custom_all_reduce is true"
		case containsArg(r.Args, "--disable-custom-all-reduce"):
			why = "its args hold --disable-custom-all-reduce"
		case r.TPSize < 2:
			why = fmt.Sprintf("tp_size is %d (no allreduce runs without tensor parallelism)", r.TPSize)
		}
		if why == "" {
			continue
		}
		if c.Implicit {
			at := l.expectAt[name]
			l.errorc(CodeConflict, at.node, at.field, "config %s expects allreduce custom, but %s", name, why)
		} else {
			l.errorc(CodeConflict, l.checkNode[c], l.checkPath[c], "config %s expects allreduce custom, but %s", name, why)
		}
	}
}

func containsArg(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// name: "expect custom-ar allreduce == custom".
func (p *ExpectParams) name(CheckKind) string {
	return fmt.Sprintf("expect %s allreduce == %s", strings.Join(p.Configs, ","), p.Expect.AllReduce)
}

// impliedExpects adds an expect check for every configs[].expect, unless an explicit one already
// says the same.
func impliedExpects(s *Spec) {
	for _, cfg := range s.Configs {
		if cfg.Expect.IsZero() || cfg.Name == "" {
			continue
		}
		covered := false
		for _, c := range s.Checks {
			if x := c.Expectation(); x != nil && x.Expect == cfg.Expect && len(x.Configs) == 1 && x.Configs[0] == cfg.Name {
				covered = true
			}
		}
		if !covered {
			s.Checks = append(s.Checks, &Check{Kind: KindExpect, Params: &ExpectParams{Configs: []string{cfg.Name}, Expect: cfg.Expect}, Implicit: true, Line: cfg.Line})
		}
	}
}

// workloadFor: an expectation reads what the engine did at start-up and runs no workload.
func (p *ExpectParams) workloadFor(string) string { return "" }
