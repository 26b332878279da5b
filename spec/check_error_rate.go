package spec

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/reckon-ci/reckon/internal/num"
)

// KindErrorRate bounds the share of failed requests over a config's trials of one workload, all
// launches together (ErrorRateParams).
const KindErrorRate CheckKind = "error_rate"

// DefaultErrorRateMax is an error_rate check's max when the spec leaves it out: 1% of the
// requests may fail. Its one home.
const DefaultErrorRateMax = 0.01

// ErrorRateParams are the fields of an error_rate check: per config, failed / (completed +
// failed) summed over the config's trials of Workload (every launch) must be at most Max. A
// config without trials proves nothing and is an error (unverified). Judged per config.
type ErrorRateParams struct {
	// Configs are the configs the check applies to, in spec order; none written means every
	// config (filled when the spec is linked).
	Configs []string `json:"configs,omitempty"`
	// Workload is the workload whose trials are counted (may be left out when the spec has one).
	Workload string `json:"workload,omitempty"`
	// Max is the largest failed share allowed, a fraction in [0, 1] (written 1%, 0.01 or 0;
	// default DefaultErrorRateMax). 0 allows no failed request.
	Max float64 `json:"max"`
}

func decodeErrorRate(b *builder, m *mapping, s *Spec) Params {
	p := &ErrorRateParams{Max: DefaultErrorRateMax}
	p.Configs = b.refList(m)
	switch {
	case m.has("workload"):
		p.Workload = b.refStr(m, "workload", "workload", true)
	case len(s.Workloads) == 1:
		m.known = append(m.known, "workload")
		p.Workload = s.Workloads[0].Name
	default:
		m.known = append(m.known, "workload")
		m.missing("workload", "the workload whose trials' failed requests are counted (required unless the spec has exactly one workload)")
	}
	if f, ok := errorRateMax(m); ok {
		p.Max = f
	}
	return p
}

// errorRateMax reads max: a percentage in [0%, 100%] ("1%", "0%") or a plain fraction in [0, 1)
// (0.01, 0). A plain number of 1 or more is refused rather than guessed (1 could mean 1% or 100%).
func errorRateMax(m *mapping) (float64, bool) {
	v, ok := m.get("max")
	if !ok {
		return 0, false
	}
	const expected = "a percentage in [0%, 100%] such as 1%, or a fraction in [0, 1) such as 0.01"
	var f float64
	pct := false
	switch x := v.(type) {
	case *ast.StringNode:
		t := strings.TrimSpace(x.Value)
		if !strings.HasSuffix(t, "%") {
			// A plain number YAML left a string (1e-2); a quoted "0.01" or a word is refused.
			g, good := num.ParseDecimal(t)
			if !good || x.GetToken().Type != token.StringType {
				m.bad(v, "max", "expected %s, got %q", expected, x.Value)
				return 0, false
			}
			f = g
			break
		}
		g, _, err := num.ParseFraction(t)
		if err != nil {
			m.bad(v, "max", "expected %s, got %q", expected, x.Value)
			return 0, false
		}
		f, pct = g, true
	case *ast.IntegerNode, *ast.FloatNode:
		if f, ok = m.number("max"); !ok {
			return 0, false
		}
	default:
		m.bad(v, "max", "expected %s, got %s", expected, describe(v))
		return 0, false
	}
	written := num.Exact(f)
	if pct {
		written = num.Exact(f*100) + "%"
	}
	switch {
	case math.IsNaN(f) || f < 0:
		m.bad(v, "max", "expected %s, got %s: a share of failed requests is never negative", expected, written)
		return 0, false
	case pct && f > 1:
		m.bad(v, "max", "expected %s, got %s: more than every request", expected, written)
		return 0, false
	case !pct && f >= 1:
		m.bad(v, "max", "expected %s, got %s (write %s%% for a percentage)", expected, num.Exact(f), num.Exact(f))
		return 0, false
	}
	return f, true
}

// Scope: an error rate is judged on each config alone, over all its launches.
func (p *ErrorRateParams) Scope() Scope { return ScopePerConfig }

// ConfigNames returns the check's configs.
func (p *ErrorRateParams) ConfigNames() []string { return p.Configs }

// link: no configs written means every config.
func (p *ErrorRateParams) link(l *linker, _ *Check) {
	if len(p.Configs) == 0 {
		p.Configs = append([]string(nil), l.configNames...)
	}
}

func (p *ErrorRateParams) validate(*linker, *Check) {}

// workloadFor: each of the check's configs runs its workload.
func (p *ErrorRateParams) workloadFor(config string) string {
	if slices.Contains(p.Configs, config) {
		return p.Workload
	}
	return ""
}

// name: "error_rate <= 1% (decode)".
func (p *ErrorRateParams) name(CheckKind) string {
	return fmt.Sprintf("error_rate <= %s%% (%s)", num.Exact(p.Max*100), p.Workload)
}
