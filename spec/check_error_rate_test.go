package spec

import (
	"strings"
	"testing"
)

// TestErrorRateMax: max takes effect (default 1%, 0 allowed and kept, percentages and
// fractions), and every bad value is refused with the file, line and field.
func TestErrorRateMax(t *testing.T) {
	good := []struct {
		yaml string
		want float64
	}{
		{"{kind: error_rate, configs: [a]}", DefaultErrorRateMax},
		{"{kind: error_rate, configs: [a], max: 0}", 0},
		{"{kind: error_rate, configs: [a], max: 0%}", 0},
		{"{kind: error_rate, configs: [a], max: 2.5%}", 0.025},
		{"{kind: error_rate, configs: [a], max: 0.05}", 0.05},
		{"{kind: error_rate, configs: [a], max: 100%}", 1},
	}
	for _, tc := range good {
		s, err := Parse([]byte(kindHead+"  - "+tc.yaml+"\n"), "k.yaml")
		if err != nil {
			t.Errorf("%s: %v", tc.yaml, err)
			continue
		}
		p, ok := s.Checks[0].Params.(*ErrorRateParams)
		if !ok || p.Max != tc.want || p.Workload != "w" || len(p.Configs) != 1 {
			t.Errorf("%s: params %+v, want max %v", tc.yaml, s.Checks[0].Params, tc.want)
		}
	}
	bad := []struct{ yaml, want string }{
		{"{kind: error_rate, configs: [a], max: -1%}", "k.yaml:10:43: checks[0].max: expected a percentage in [0%, 100%] such as 1%, or a fraction in [0, 1) such as 0.01, got -1%: a share of failed requests is never negative"},
		{"{kind: error_rate, configs: [a], max: -0.01}", "never negative"},
		{"{kind: error_rate, configs: [a], max: 150%}", "more than every request"},
		{"{kind: error_rate, configs: [a], max: 1}", "(write 1% for a percentage)"},
		{"{kind: error_rate, configs: [a], max: lots}", `got "lots"`},
		{`{kind: error_rate, configs: [a], max: "0.01"}`, `got "0.01"`},
		{"{kind: error_rate, configs: [a], max: [1]}", "checks[0].max: expected a percentage"},
		{"{kind: error_rate, configs: [nope]}", "nope"},
		{"{kind: error_rate, configs: [a], workload: nope}", "nope"},
		{"{kind: error_rate, configs: [a], maximum: 1%}", "maximum"},
	}
	for _, tc := range bad {
		_, err := Parse([]byte(kindHead+"  - "+tc.yaml+"\n"), "k.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.yaml, err, tc.want)
		}
	}
}

// TestErrorRateNeedsItsWorkload: a config an error_rate check names runs the check's workload
// (a required seam of every kind, workloadFor), and one it does not name runs none.
func TestErrorRateNeedsItsWorkload(t *testing.T) {
	head := strings.Replace(kindHead, "workloads: [{name: w,", "workloads: [{name: v, concurrency: 1, num_prompts: 1, input_len: 1, output_len: 1}, {name: w,", 1)
	s, err := Parse([]byte(head+"  - {kind: error_rate, configs: [a], workload: w}\n"), "k.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if ws := s.WorkloadsFor("a"); len(ws) != 1 || ws[0].Name != "w" {
		t.Errorf("WorkloadsFor(a) = %v, want [w]", ws)
	}
	if ws := s.WorkloadsFor("b"); len(ws) != 0 {
		t.Errorf("WorkloadsFor(b) = %v, want none", ws)
	}
	_, err = Parse([]byte(head+"  - {kind: error_rate, configs: [a]}\n"), "k.yaml")
	if err == nil || !strings.Contains(err.Error(), "checks[0]: missing workload") && !strings.Contains(err.Error(), "workload") {
		t.Errorf("two workloads, none named: %v", err)
	}
}
