package gate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/wire"
)

// probesDir holds the probe fixtures: calibrated (v2) runs of refengine and of the torch probe on
// CPUs (gloo), and faults/ with broken candidates (ci/probes/testdata/README.md).
const probesDir = "../ci/probes/testdata"

func loadProbeFile(t *testing.T, path string) *wire.AllReduceProbe {
	t.Helper()
	p, err := wire.ReadAllReduceProbe(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func algo(t *testing.T, c *wire.AllReduceProbeCase, name string) *wire.AllReduceProbeAlgorithm {
	t.Helper()
	for i := range c.Algorithms {
		if c.Algorithms[i].Name == name {
			return &c.Algorithms[i]
		}
	}
	t.Fatalf("no algorithm %s in case %d %s %s", name, c.SizeBytes, c.DType, c.Inputs)
	return nil
}

// TestCalibratedCorrectRunsPass: every calibrated fixture of a correct run passes, with its
// controls behaving; the verdict says it is calibrated.
func TestCalibratedCorrectRunsPass(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(probesDir, "*.json"))
	n := 0
	for _, f := range files {
		p := loadProbeFile(t, f)
		if p.Schema != wire.AllReduceProbeSchema {
			continue
		}
		n++
		v := AllReduceProbeCheck(p, nil)
		if v.Outcome != Pass || !strings.Contains(v.Message, "calibrated rule holds") || v.Metrics["calibrated"] != 1 ||
			v.Metrics["positive_controls_failing"] != v.Metrics["positive_controls"] {
			t.Errorf("%s: %s %s\n%.2000s", f, v.Outcome, v.Message, v.Details)
		}
		if w := v.Metrics["negative_control_worst_nrmse_ratio"]; w > 1.4 {
			t.Errorf("%s: a correct twin at %.3gx of another: too close to the 1.5x bound", f, w)
		}
	}
	if n < 5 {
		t.Fatalf("%d calibrated fixtures, want refengine tp2/4/8 and gloo tp2/4", n)
	}
}

// TestCalibratedFaultFixturesFail: a broken candidate fails with its reason; a probe without
// controls is rejected.
func TestCalibratedFaultFixturesFail(t *testing.T) {
	for _, tc := range []struct {
		file    string
		outcome Outcome
		want    []string
	}{
		{"refengine_tp4_candidate_scale.json", Fail, []string{"one_shot is not exact on integer inputs"}},
		{"refengine_tp2_candidate_scale.json", Fail, []string{"one_shot max_ulp", "near-bitwise rule: at most 1"}},
		{"refengine_tp4_candidate_drop_peer.json", Fail, []string{"65540 B", "one_shot is not exact on integer inputs"}},
		{"refengine_tp4_candidate_stale.json", Fail, []string{"one_shot is not exact on integer inputs"}},
		{"refengine_tp4_candidate_fallback.json", Fail, []string{"one_shot took its custom path in only 0 of 64 calls", "fell back"}},
		{"refengine_tp4_candidate_rank_order.json", Fail, []string{"left the ranks holding different results"}},
		{"refengine_tp4_no_controls.json", Error, []string{"the calibrated rule rejects this probe", "no positive controls"}},
	} {
		p := loadProbeFile(t, filepath.Join(probesDir, "faults", tc.file))
		v := AllReduceProbeCheck(p, nil)
		if v.Outcome != tc.outcome {
			t.Errorf("%s: %s %s, want %s", tc.file, v.Outcome, v.Message, tc.outcome)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(v.Message, w) {
				t.Errorf("%s: message lacks %q: %s", tc.file, w, v.Message)
			}
		}
	}
	// Without its integer cases the scale fault is caught by the ratio alone (random and wide).
	p := loadProbeFile(t, filepath.Join(probesDir, "faults", "refengine_tp4_candidate_scale.json"))
	var keep []wire.AllReduceProbeCase
	for _, c := range p.Results {
		if c.Inputs != "integer" {
			keep = append(keep, c)
		}
	}
	p.Results = keep
	v := AllReduceProbeCheckCalibrated(p, map[string]Tolerance{"float32": {MaxRelErr: 1}, "bfloat16": {MaxRelErr: 1}}, nil, DefaultAllReduceCalibration())
	if v.Outcome != Fail || !strings.Contains(v.Message, "one_shot NRMSE") || !strings.Contains(v.Message, "> 1.5x") {
		t.Errorf("scale by ratio: %s %s", v.Outcome, v.Message)
	}
}

// TestCalibratedCatchesWhatTheFixedBoundMisses: a 1% scale error in bf16 at 8 ranks is inside the
// rounding bound of any summation order (2.8e-2), so the fixed rule passes it; the calibrated rule
// fails it at about 2.9x the best correct algorithm's NRMSE (numerics-equivalence.md §6.4: 2.5x).
func TestCalibratedCatchesWhatTheFixedBoundMisses(t *testing.T) {
	p := loadProbeFile(t, filepath.Join(probesDir, "refengine_probe_tp8.json"))
	var keep []wire.AllReduceProbeCase
	for _, c := range p.Results {
		if c.DType == "bfloat16" && c.Inputs == "random" && c.SizeBytes == 64<<10 {
			cand, scaled := algo(t, &c, "one_shot"), algo(t, &c, "one_shot+scale")
			engaged := *cand.EngagedCalls
			*cand = *scaled
			cand.Name, cand.EngagedCalls, cand.FaultedCalls = "one_shot", &engaged, nil
			keep = append(keep, c)
		}
	}
	if len(keep) != 1 {
		t.Fatalf("%d cases", len(keep))
	}
	p.Results = keep
	v := AllReduceProbeCheck(p, nil)
	if v.Outcome != Fail || !strings.Contains(v.Message, "one_shot NRMSE") {
		t.Fatalf("calibrated: %s %s", v.Outcome, v.Message)
	}
	if r := v.Metrics["candidate_worst_nrmse_ratio"]; r < 2.5 || r > 3.5 {
		t.Errorf("ratio %.3g, want about 2.9", r)
	}
	fixed := allReduceProbeFixed(p, nil, []string{"one_shot"})
	if fixed.Outcome != Pass {
		t.Errorf("fixed rule: %s %s (expected to miss a 1%% bf16 error at 8 ranks)", fixed.Outcome, fixed.Message)
	}
}

// TestCalibratedControlsMustBehave: controls that misbehave make the verdict an error, naming
// the control; so do missing controls.
func TestCalibratedControlsMustBehave(t *testing.T) {
	base := filepath.Join(probesDir, "refengine_probe_tp4.json")
	for _, tc := range []struct {
		name    string
		break_  func(p *wire.AllReduceProbe)
		outcome Outcome
		want    string
	}{
		{"negative control outside the bound", func(p *wire.AllReduceProbe) {
			for i := range p.Results {
				c := &p.Results[i]
				if c.DType == "bfloat16" && c.Inputs == "random" && c.SizeBytes == 64<<10 {
					tr := algo(t, c, "tree")
					x := *tr.NRMSE * 2
					tr.NRMSE = &x
				}
			}
		}, Error, "calibration does not hold: negative control tree fails at bfloat16 random inputs, 64 KiB"},
		{"positive control that passes", func(p *wire.AllReduceProbe) {
			for i := range p.Results {
				c := &p.Results[i]
				s, good := algo(t, c, "one_shot+scale"), algo(t, c, "one_shot")
				faulted := *s.FaultedCalls
				*s = *good
				s.Name, s.FaultedCalls = "one_shot+scale", &faulted
			}
		}, Error, "positive control one_shot+scale (scale) passes all 40 cases"},
		{"positive control never active", func(p *wire.AllReduceProbe) {
			for i := range p.Results {
				c := &p.Results[i]
				s, good := algo(t, c, "one_shot+drop_peer"), algo(t, c, "one_shot")
				zero := int64(0)
				*s = *good
				s.Name, s.FaultedCalls = "one_shot+drop_peer", &zero
			}
		}, Error, "its fault was never active"},
		{"custom path above its limit", func(p *wire.AllReduceProbe) {
			for i := range p.Results {
				c := &p.Results[i]
				if c.SizeBytes > 512<<10 {
					a := algo(t, c, "one_shot")
					a.EngagedCalls = &c.Calls
				}
			}
		}, Fail, "took its custom path in 4 calls of a message above its max_bytes 512 KiB"},
		{"partly fell back", func(p *wire.AllReduceProbe) {
			a := algo(t, &p.Results[0], "one_shot")
			half := p.Results[0].Calls / 2
			a.EngagedCalls = &half
		}, Fail, "took its custom path in only 32 of 64 calls"},
		{"ranks disagree", func(p *wire.AllReduceProbe) {
			no := false
			algo(t, &p.Results[0], "one_shot").RanksIdentical = &no
		}, Fail, "left the ranks holding different results"},
		{"no twins", func(p *wire.AllReduceProbe) {
			var roles []wire.AllReduceProbeRole
			for _, r := range p.Calibration.Roles {
				if r.Role != wire.RoleTwin {
					roles = append(roles, r)
				}
			}
			p.Calibration.Roles = roles
		}, Error, "no negative controls"},
		{"no calibration", func(p *wire.AllReduceProbe) { p.Calibration = nil }, Error, "needs the probe's calibration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := loadProbeFile(t, base)
			tc.break_(p)
			v := AllReduceProbeCheck(p, nil)
			if v.Outcome != tc.outcome || !strings.Contains(v.Message, tc.want) {
				t.Errorf("%s %s\nwant %s mentioning %q", v.Outcome, v.Message, tc.outcome, tc.want)
			}
		})
	}
}

// TestCalibratedOptions: algorithms selects candidates (a non-candidate is an error), the bounds
// take effect, and bad bounds are an error.
func TestCalibratedOptions(t *testing.T) {
	p := loadProbeFile(t, filepath.Join(probesDir, "torch_gloo_probe_cpu_tp4.json"))
	if v := AllReduceProbeCheckOf(p, nil, []string{"two_shot"}); v.Outcome != Pass || !strings.Contains(v.Message, ": two_shot within") {
		t.Errorf("two_shot only: %s %s", v.Outcome, v.Message)
	}
	if v := AllReduceProbeCheckOf(p, nil, []string{"ring"}); v.Outcome != Error || !strings.Contains(v.Message, "algorithms names ring, which is not a candidate") {
		t.Errorf("ring: %s %s", v.Outcome, v.Message)
	}
	// A bound of 1.0x is inside the spread of correct twins: the negative controls say so.
	if v := AllReduceProbeCheckCalibrated(p, nil, nil, AllReduceCalibration{MaxNRMSERatio: 1, FloorULP: 1}); v.Outcome != Error || !strings.Contains(v.Message, "negative control") {
		t.Errorf("ratio 1: %s %s", v.Outcome, v.Message)
	}
	if v := AllReduceProbeCheckCalibrated(p, nil, nil, AllReduceCalibration{MaxNRMSERatio: 0.5}); v.Outcome != Error || !strings.Contains(v.Message, "max_nrmse_ratio 0.5") {
		t.Errorf("bad bound: %s %s", v.Outcome, v.Message)
	}
	if v := AllReduceProbeCheckCalibrated(nil, nil, nil, DefaultAllReduceCalibration()); v.Outcome != Error {
		t.Errorf("nil: %s", v.Outcome)
	}
	// The verdict encodes as JSON (no infinite metrics).
	if _, err := json.Marshal(AllReduceProbeCheck(p, nil)); err != nil {
		t.Error(err)
	}
}

// TestUncalibratedProbesSaySo: a v1 probe is judged by the fixed rule, and the verdict says it
// was not calibrated.
func TestUncalibratedProbesSaySo(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(probesDir, "torch_allreduce_probe_h200x2.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p wire.AllReduceProbe
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	v := AllReduceProbeCheck(&p, nil)
	if v.Outcome != Pass || !strings.Contains(v.Message, "within tolerance") || !strings.Contains(v.Message, "[uncalibrated: reckon.allreduce-probe/v1 has no oracle or controls") {
		t.Errorf("%s %s", v.Outcome, v.Message)
	}
}
