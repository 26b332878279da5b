package reporters

import (
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

func TestTerminalPlainFailuresFirst(t *testing.T) {
	r := sampleRun()
	var b strings.Builder
	if err := WriteTerminal(&b, r, TerminalOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	for _, bad := range []string{"\x1b", "&gt;", "&lt;", "&amp;", "\\_", "**", "`", "<script>"} {
		if strings.Contains(out, bad) {
			t.Errorf("terminal report contains %q (an escape or markup):\n%s", bad, out)
		}
	}
	fail := strings.Index(out, "Failures (")
	und := strings.Index(out, "Undecided (")
	cfg := strings.Index(out, "Configs")
	if fail < 0 || und < fail || cfg < und {
		t.Errorf("want failures, then undecided, then configs; got positions %d %d %d", fail, und, cfg)
	}
	for _, want := range []string{"FAIL  reckon gate on pcie-custom-ar", "custom-ar: KV cache 0.90 GiB is under its floor 8 GiB", "why: KV cache -91%", "ERROR eagle3 · health", "log: progress 100%", "UNDECIDED graph-bs-160"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestTerminalColourOnlyWhenAsked(t *testing.T) {
	var b strings.Builder
	if err := WriteTerminal(&b, sampleRun(), TerminalOptions{Color: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), ansiRed) {
		t.Errorf("Color: true wrote no colour")
	}
	// Engine text cannot smuggle its own escapes in, even with colour on.
	if strings.Contains(b.String(), "\x1b[31mERROR\x1b[0m <script>") {
		t.Errorf("engine escapes passed through")
	}
}

func TestNextStepFromStatistics(t *testing.T) {
	c := &gate.Check{Verdict: gate.Verdict{Outcome: "inconclusive", Stat: &gate.StatResult{Outcome: gate.Undecided, NBase: 5, NHead: 5, MoreTrials: 3, MaxTrials: 30}}}
	if got, want := NextStep(c), "about 3 more trials per side would decide (workload trials: 8)"; got != want {
		t.Errorf("NextStep = %q, want %q", got, want)
	}
	c.Metrics = map[string]float64{"launches_head": 3, "launches_base": 3}
	c.Stat.MoreTrials = 2
	if got, want := NextStep(c), "about 2 more launches per side would decide (workload launches: 5)"; got != want {
		t.Errorf("NextStep = %q, want %q", got, want)
	}
	c.Stat.MoreTrials = -1
	if got := NextStep(c); !strings.Contains(got, "more than 30 launches per side") {
		t.Errorf("NextStep = %q", got)
	}
	if got := NextStep(&gate.Check{Verdict: gate.Verdict{Outcome: "no_baseline"}}); !strings.Contains(got, "reckon baseline record") {
		t.Errorf("NextStep(no_baseline) = %q", got)
	}
	if got := NextStep(&gate.Check{Verdict: gate.Verdict{Outcome: "pass"}}); got != "" {
		t.Errorf("NextStep(pass) = %q", got)
	}
}

// TestSameMediansInTablesAndVerdicts: with relaunches, the configs table and the throughput chart
// show the medians the verdict line states (of the launch means), not the median of all trials.
func TestSameMediansInTablesAndVerdicts(t *testing.T) {
	r := abRun()
	for i, want := range []string{"1210 (3 launches)", "506.9 (3 launches)"} {
		if got := throughputTexts(r, &r.Configs[i]); len(got) != 1 || got[0] != want {
			t.Errorf("%s: %v, want %s", r.Configs[i].Name, got, want)
		}
	}
	var b strings.Builder
	if err := WriteTerminal(&b, r, TerminalOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "1210 (3 launches)") || !strings.Contains(b.String(), "next: about 4 more launches per side would decide (workload launches: 7)") {
		t.Errorf("terminal:\n%s", b.String())
	}
}
