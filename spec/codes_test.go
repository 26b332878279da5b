package spec

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// badCodes maps each file of fixtures/specs/bad to the code and field path of every error it
// must produce, in file order. badSpecs (bad_test.go) pins the full texts.
var badCodes = []struct {
	name string
	want []string // "code field"
}{
	{"bad-alias", []string{"syntax engine.args", "syntax configs[0]", "syntax configs[0]"}},
	{"bad-check-fields", []string{"missing-field checks[0]", "unknown-field checks[0]", "conflict checks[1].max", "unknown-metric checks[2].metric", "value checks[2].min_effect", "value checks[2].alpha", "value checks[2].against", "value checks[2].test", "value checks[2].power", "missing-field checks[3]", "value checks[3].max_abs_err", "value checks[3].max_abs_err.bf16"}},
	{"bad-duration", []string{"value engine.ready_timeout", "type engine.stop_grace", "value workloads[0].request_timeout"}},
	{"bad-enum", []string{"value engine.kind", "value configs[0].expect.allreduce", "value configs[1].speculative.algorithm", "value checks[0].kind"}},
	{"bad-names", []string{"value name", "value tags[1]", "value engine.env", "type engine.env.GOOD", "value configs[0].name", "value configs[1].name"}},
	{"contradictory-expect", []string{"conflict configs[0].expect.allreduce", "conflict configs[1].expect.allreduce", "value configs[2].args[0]", "conflict checks[0]"}},
	{"dangling-reference", []string{"unknown-name checks[0].config", "unknown-name checks[1].workload", "unknown-name checks[1].against"}},
	{"duplicate-config", []string{"duplicate configs[2].name"}},
	{"duplicate-key", []string{"duplicate engine", "duplicate configs[0].env", "duplicate checks[1].name"}},
	{"empty", []string{"empty "}},
	{"equivalence-calibration", []string{"value numerics.batch_size", "value numerics.prompt_logprobs", "conflict checks[0].twin", "conflict checks[1].max_ratio", "conflict checks[1].bitwise_tolerance", "conflict checks[2].twin", "conflict checks[2].max_distance", "value checks[3].max_ratio"}},
	{"equivalence-without-numerics", []string{"missing-field checks[0]", "conflict checks[0].mean_abs_logprob_delta"}},
	{"managed-flags", []string{"value engine.args[0]", "value engine.args[3]", "value configs[0].args[0]", "value configs[0].args[2]"}},
	{"measurement-fields", []string{"unknown-field workloads[0].goodput", "value workloads[0].goodput.tpot_ms", "value workloads[0].temperature", "value workloads[0].top_p", "type workloads[0].ignore_eos", "value workloads[0].endpoint", "unknown-name workloads[0].configs[1]", "missing-field workloads[1]", "missing-field checks[0]", "conflict checks[1].workload", "unmeasured-metric checks[2].metric", "missing-field checks[3].metric", "missing-field checks[4].metric"}},
	{"missing-required", []string{"missing-field ", "missing-field engine", "missing-field configs[0]", "missing-field workloads[0]", "missing-field workloads[0]", "missing-field workloads[0]", "missing-field checks[0]"}},
	{"no-workloads", []string{"missing-field checks[0]"}},
	{"no-configs", []string{"value configs"}},
	{"not-a-mapping", []string{"type "}},
	{"open-and-closed-loop", []string{"conflict workloads[0].request_rate", "conflict workloads[1].burstiness", "value workloads[1].max_trials"}},
	{"self-comparison", []string{"conflict checks[0].of", "conflict checks[1].head"}},
	{"syntax-error", []string{"syntax "}},
	{"two-documents", []string{"syntax "}},
	{"underpowered", []string{"no-power checks[0]"}},
	{"unknown-key", []string{"unknown-field engine", "unknown-field configs[0]"}},
	{"wrong-type", []string{"type engine.tp_size", "type engine.mem_fraction_static", "type configs[0].args", "type configs[0].cuda_graph_max_bs"}},
}

// TestBadSpecCodes: every error of a bad spec carries a code and its field path, and the bad
// fixtures are the same set as badSpecs'.
func TestBadSpecCodes(t *testing.T) {
	if len(badCodes) != len(badSpecs) {
		t.Errorf("badCodes has %d entries, badSpecs %d", len(badCodes), len(badSpecs))
	}
	for _, tc := range badCodes {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("../fixtures/specs/bad", tc.name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(data, tc.name+".yaml")
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, want ErrorList: %v", err, err)
			}
			var got []string
			for _, e := range list {
				got = append(got, e.Code+" "+e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("codes and paths (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLimitCode: the limits' errors carry CodeLimit.
func TestLimitCode(t *testing.T) {
	_, err := Parse(make([]byte, MaxSpecBytes+1), "big.yaml")
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 || list[0].Code != CodeLimit {
		t.Fatalf("error %v, want one with code %s", err, CodeLimit)
	}
}
