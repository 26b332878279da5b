// Package statdefault is the one home of the defaults of a statistical verdict: the levels and
// the smallest effect that a spec's throughput or latency check gets when it leaves the field
// out (spec), that a zero gate.StatOptions field means (gate), and that the runner falls back to
// (suites). It is a leaf: any package may import it.
package statdefault

const (
	// Alpha is the family-wise significance level of the regression test (spec: alpha).
	Alpha = 0.01
	// MinEffect is the smallest relative change of the median that counts, as a fraction
	// (spec: min_effect; 0.02 = 2%).
	MinEffect = 0.02
	// RankAlpha is the level of the Mann-Whitney U guard that a regression needs on top of the
	// t-test at Alpha (gate.StatOptions.RankAlpha); spec rejects a check whose trials could never
	// reach it.
	RankAlpha = 0.05
	// Power is the probability with which a design must find a true change of min_effect: the
	// plans reckon proposes (spec check, an undecided verdict's next step) and the sensitivity a
	// detection test (gate.StatOptions.Detect) must reach to pass (spec: power).
	Power = 0.95
)
