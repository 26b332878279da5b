package spec

import (
	"strings"
	"testing"
)

// Every number of a spec is bounded with an error at its line (input_len: 1000000000 passed
// spec check, and the gate died allocating 144 GB).
func TestSpecValueDomains(t *testing.T) {
	const base = `name: t
engine:
  kind: sglang
  model: m
  tp_size: TP
  stop_grace: GRACE
configs:
  - name: CONFIG
workloads:
  - name: w
    concurrency: 4
    num_prompts: PROMPTS
    input_len: IN
    output_len: OUT
    trials: TRIALS
    launches: LAUNCHES
checks:
  - {kind: floor, metric: kv_cache_tokens, min: 1}
`
	vals := map[string]string{"TP": "1", "GRACE": "5s", "CONFIG": "a", "PROMPTS": "16", "IN": "16", "OUT": "24", "TRIALS": "2", "LAUNCHES": "1"}
	spec := func(over map[string]string) string {
		s := base
		for k, v := range vals {
			if o, ok := over[k]; ok {
				v = o
			}
			s = strings.Replace(s, k, v, 1)
		}
		return s
	}
	if _, err := Parse([]byte(spec(nil)), "t.yaml"); err != nil {
		t.Fatalf("the good spec: %v", err)
	}
	for _, tc := range []struct {
		over map[string]string
		want string
	}{
		{map[string]string{"IN": "1000000000"}, "t.yaml:13:16: workloads[0].input_len: 1000000000 is more than 1048576"},
		{map[string]string{"OUT": "2000000"}, "t.yaml:14:17: workloads[0].output_len: 2000000 is more than 1048576"},
		{map[string]string{"IN": "600000", "OUT": "600000"}, "workloads[0].output_len: input_len + output_len is 1200000 tokens"},
		{map[string]string{"PROMPTS": "100000", "IN": "4096"}, "t.yaml:12:18: workloads[0].num_prompts: num_prompts x (input_len + output_len) is 412000000 tokens"},
		{map[string]string{"PROMPTS": "5000000"}, "workloads[0].num_prompts: 5000000 is more than 1000000"},
		{map[string]string{"TRIALS": "100000"}, "t.yaml:15:13: workloads[0].trials: 100000 is more than 1000"},
		{map[string]string{"LAUNCHES": "1000"}, "t.yaml:16:15: workloads[0].launches: 1000 is more than 100"},
		{map[string]string{"TP": "4096"}, "t.yaml:5:12: engine.tp_size: 4096 is more than 64"},
		{map[string]string{"GRACE": "100h"}, "t.yaml:6:15: engine.stop_grace: 100h0m0s is more than 10m0s"},
		{map[string]string{"CONFIG": strings.Repeat("c", 101)}, "configs[0].name: config name is 101 characters, more than the 100"},
	} {
		_, err := Parse([]byte(spec(tc.over)), "t.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.over, err, tc.want)
		}
	}
}
