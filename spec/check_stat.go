package spec

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/reckon-ci/reckon/internal/num"
	"github.com/reckon-ci/reckon/internal/statdefault"
)

// StatParams are the fields of a statistical check (kinds throughput and latency, one type for
// both): a result metric of Config under Workload compared over trials (launches as the unit)
// against the stored baseline, another config of the run or the results history. Every
// statistical check of a run is one Holm-Bonferroni family.
type StatParams struct {
	// Metric is a result metric (see IsResultMetric), a name of the metric registry.
	Metric string `json:"metric,omitempty"`
	// Config is the config being judged.
	Config string `json:"config,omitempty"`
	// Workload is the workload whose trials are compared.
	Workload string `json:"workload,omitempty"`
	// Against is AgainstBaseline, AgainstConfig or AgainstHistory.
	Against string `json:"against,omitempty"`
	// AgainstConfig is the other config when Against is AgainstConfig.
	AgainstConfig string `json:"against_config,omitempty"`
	// HistoryRuns (against: history) is the fewest runs since the series' last change point the
	// window must hold (history_runs, default DefaultHistoryRuns); fewer is no_baseline.
	HistoryRuns int `json:"history_runs,omitempty"`
	// MinEffect is the smallest relative change that counts (0.05 = 5%; default
	// statdefault.MinEffect).
	MinEffect float64 `json:"min_effect,omitempty"`
	// Alpha is the family-wise significance level (Holm-Bonferroni over the run's statistical
	// checks; default statdefault.Alpha).
	Alpha float64 `json:"alpha,omitempty"`
	// Test is TestCompare or TestDetect (test; default TestDetect against the history, the
	// nightly detector, and TestCompare otherwise): a detection test passes when it finds no
	// regression and had Power to find one of MinEffect (gate.StatOptions.Detect).
	Test string `json:"test,omitempty"`
	// Power is the probability with which the check's design must find a change of MinEffect
	// (power; default statdefault.Power): the sensitivity a detection test needs to pass, and the
	// power an undecided verdict's plan is made for.
	Power float64 `json:"power,omitempty"`
	// metricAt is where the metric field was written, for errors found after loading.
	metricAt *Error
}

func decodeStat(b *builder, m *mapping, s *Spec) Params {
	p := &StatParams{}
	p.Config = b.refStr(m, "config", "config", true)
	if m.has("workload") {
		p.Workload = b.refStr(m, "workload", "workload", true)
	} else {
		m.known = append(m.known, "workload")
		switch len(s.Workloads) {
		case 1:
			p.Workload = s.Workloads[0].Name
		case 0:
			m.missing("workload", "a workload name, and a workloads section that defines it")
		default:
			m.missing("workload", "a workload name (required when the spec has more than one workload)")
		}
	}
	p.Metric = b.metric(m, true, IsResultMetric, fromWorkload)
	p.metricAt = fieldAt(m, "metric")
	p.decodeAgainst(b, m)
	p.MinEffect = statdefault.MinEffect
	if v, ok := percent(m, "min_effect"); ok {
		p.MinEffect = v
	}
	p.Alpha = statdefault.Alpha
	if v := m.numberIn("alpha", math.SmallestNonzeroFloat64, 0.5, "a significance level in (0, 0.5]"); v != nil {
		p.Alpha = *v
	}
	p.Power = statdefault.Power
	if v, ok := percent(m, "power"); ok {
		if v < 0.5 {
			m.bad(m.entries[m.index["power"]].value, "power", "expected a power of at least 50%% (a test that misses a change of min_effect more often than it finds it), got %s", num.Pct(v)[1:])
		} else {
			p.Power = v
		}
	}
	p.Test = TestCompare
	if p.Against == AgainstHistory {
		p.Test = TestDetect
	}
	if t, ok := m.str("test"); ok {
		switch t {
		case TestCompare, TestDetect:
			p.Test = t
		default:
			m.bad(m.entries[m.index["test"]].value, "test", "expected compare or detect, got %q", t)
		}
	}
	return p
}

// Statistical tests of a check (StatParams.Test).
const (
	// TestCompare decides regression, improvement or no change (the no-change margin); anything
	// else is inconclusive.
	TestCompare = "compare"
	// TestDetect is a one-sided detection test: a regression when it finds one, else a pass
	// when it had the check's power to find a change of min_effect, else inconclusive.
	TestDetect = "detect"
)

// decodeAgainst reads against (baseline, history or config:NAME) and history_runs.
func (p *StatParams) decodeAgainst(b *builder, m *mapping) {
	p.Against = AgainstBaseline
	if a, ok := m.str("against"); ok {
		v := m.entries[m.index["against"]].value
		switch {
		case a == AgainstBaseline:
		case a == AgainstHistory:
			p.Against = AgainstHistory
		case strings.HasPrefix(a, "config:") && strings.TrimSpace(strings.TrimPrefix(a, "config:")) != "":
			p.Against = AgainstConfig
			p.AgainstConfig = strings.TrimSpace(strings.TrimPrefix(a, "config:"))
			b.refs = append(b.refs, ref{node: v, field: m.field("against"), name: p.AgainstConfig, what: "config"})
			if p.AgainstConfig == p.Config {
				m.badc(CodeConflict, v, "against", "a config compared with itself (%q) always passes; name another config", p.Config)
			}
		default:
			m.bad(v, "against", "expected baseline, history or config:NAME, got %q", a)
		}
	}
	if m.has("history_runs") {
		if n, ok := m.integer("history_runs", 2); ok {
			p.HistoryRuns = n
			if p.Against != AgainstHistory {
				m.badc(CodeConflict, m.entries[m.index["history_runs"]].value, "history_runs", "history_runs applies to against: history only (against is %s)", p.Against)
			}
		}
	} else if p.Against == AgainstHistory {
		p.HistoryRuns = DefaultHistoryRuns
	}
}

// percent reads "5%" or a plain fraction such as 0.05 (num.ParseFraction), in (0, 1).
func percent(m *mapping, key string) (float64, bool) {
	v, ok := m.get(key)
	if !ok {
		return 0, false
	}
	const expected = "a percentage such as 5% or a fraction in (0, 1) such as 0.05"
	var f float64
	fraction := true
	switch x := v.(type) {
	case *ast.StringNode:
		t := strings.TrimSpace(x.Value)
		fraction = !strings.HasSuffix(t, "%")
		var err error
		f, _, err = num.ParseFraction(t)
		// A fraction must be written plain: a quoted "0.05" is a string.
		if errors.Is(err, num.ErrNotFraction) || fraction && x.GetToken().Type != token.StringType {
			m.bad(v, key, "expected %s, got %q", expected, x.Value)
			return 0, false
		}
	case *ast.IntegerNode, *ast.FloatNode:
		f, _ = m.number(key)
	default:
		m.bad(v, key, "expected %s, got %s", expected, describe(v))
		return 0, false
	}
	if fraction && f >= 1 {
		m.bad(v, key, "expected %s, got %s (write %s%% for a percentage)", expected, num.Exact(f), num.Exact(f))
		return 0, false
	}
	if f <= 0 || f >= 1 || math.IsNaN(f) {
		m.bad(v, key, "expected %s, got %s", expected, num.Exact(f))
		return 0, false
	}
	return f, true
}

// Scope: a statistical check is judged once after every config, whatever it compares with
// (another config, the baseline or the history), so that Holm runs over the whole family.
func (p *StatParams) Scope() Scope { return ScopeCross }

// ConfigNames returns Config, then AgainstConfig when set.
func (p *StatParams) ConfigNames() []string {
	if p.AgainstConfig == "" {
		return []string{p.Config}
	}
	return []string{p.Config, p.AgainstConfig}
}

// Compared returns the configs whose trials the check compares: Config, and AgainstConfig when
// the check is against another config.
func (p *StatParams) Compared() []string {
	if p.Against == AgainstConfig {
		return []string{p.Config, p.AgainstConfig}
	}
	return []string{p.Config}
}

// Vs names what Config is compared with: the other config, "history" or "baseline".
func (p *StatParams) Vs() string {
	switch p.Against {
	case AgainstConfig:
		return p.AgainstConfig
	case AgainstHistory:
		return AgainstHistory
	}
	return AgainstBaseline
}

func (p *StatParams) workloadFor(config string) string {
	if p.Config == config || p.AgainstConfig == config {
		return p.Workload
	}
	return ""
}

// link rejects a check its workload's trials could never decide.
func (p *StatParams) link(l *linker, c *Check) { l.checkPower(c, p) }

func (p *StatParams) validate(l *linker, c *Check) {
	l.checkGoodput(c, p.Metric, p.Workload, p.metricAt)
}

// name: "throughput custom-ar decode output_throughput vs nccl".
func (p *StatParams) name(kind CheckKind) string {
	return fmt.Sprintf("%s %s %s %s vs %s", kind, p.Config, p.Workload, p.Metric, p.Vs())
}

// RankGuardAlpha is the level of the rank test (Mann-Whitney U) that the gate requires, on top
// of its t-test at alpha, before it calls a regression (gate.StatOptions.RankAlpha); its home is
// internal/statdefault.
const RankGuardAlpha = statdefault.RankAlpha

// checkPower rejects a statistical check that could never find a regression: with n trials per
// side, the smallest one-sided p-value of the rank test is 1/C(2n, n), and it must reach
// RankGuardAlpha (n >= 3).
func (l *linker) checkPower(c *Check, p *StatParams) {
	var w *Workload
	for _, x := range l.s.Workloads {
		if x.Name == p.Workload {
			w = x
		}
	}
	if w == nil {
		return
	}
	if w.LaunchCount() > 1 {
		// Launches are the unit: one value per launch and side (a stored baseline keeps the
		// launches it was recorded with).
		if n := w.Launches; minRankP(n) > RankGuardAlpha {
			l.errorc(CodeNoPower, l.checkNode[c], l.checkPath[c], "this %s check can never find a regression: workload %q has launches: %d, and with launches as the unit the smallest p-value of the rank test is %s, above its level %s; raise launches (>= %d)",
				c.Kind, w.Name, n, num.Exact(roundSig(minRankP(n))), num.Exact(RankGuardAlpha), minTrialsFor(RankGuardAlpha))
		}
		return
	}
	n := w.MaxTrials
	if minRankP(n) > RankGuardAlpha {
		l.errorc(CodeNoPower, l.checkNode[c], l.checkPath[c], "this %s check can never find a regression: with at most %d trials per side (workload %q) the smallest p-value of the rank test is %s, above its level %s; raise trials or max_trials (>= %d)",
			c.Kind, n, w.Name, num.Exact(roundSig(minRankP(n))), num.Exact(RankGuardAlpha), minTrialsFor(RankGuardAlpha))
	}
}

// minRankP is 1/C(2n, n), the smallest one-sided p-value of an exact Mann-Whitney U test with n
// observations per side.
func minRankP(n int) float64 {
	if n <= 0 {
		return 1
	}
	c := 1.0
	for i := 1; i <= n; i++ {
		c = c * float64(n+i) / float64(i)
	}
	return 1 / c
}

func minTrialsFor(alpha float64) int {
	for n := 1; n < 64; n++ {
		if minRankP(n) <= alpha {
			return n
		}
	}
	return 64
}

func roundSig(f float64) float64 {
	if f == 0 {
		return 0
	}
	p := math.Pow(10, 3-math.Ceil(math.Log10(math.Abs(f))))
	return math.Round(f*p) / p
}
