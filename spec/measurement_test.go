package spec

import (
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/internal/num"
)

// measurementBase is a spec with two configs and two workloads that the cases below extend.
const measurementBase = `name: m
engine: {kind: sglang, model: m, tp_size: 2}
configs: [{name: nccl}, {name: custom-ar}]
workloads:
  - name: decode
    concurrency: 4
    num_prompts: 8
    input_len: 16
    output_len: 8
%s
  - name: chat
    concurrency: 2
    num_prompts: 8
    dataset: fixtures/datasets/sharegpt-mini.json
    endpoint: chat
checks:
%s
`

// TestMeasurementFieldsGood is the good half of the measurement fields' table (the bad half
// is fixtures/specs/bad/measurement-fields.yaml in badSpecs): each field as written, and what
// the spec then holds.
func TestMeasurementFieldsGood(t *testing.T) {
	for _, tc := range []struct {
		name, workload, checks string
		ok                     func(*Spec) string
	}{
		{"goodput", "    goodput: {ttft_ms: 500, tpot_ms: 50}", `  - {kind: throughput, config: nccl, workload: decode, metric: request_goodput}`, func(s *Spec) string {
			if g := s.Workloads[0].Goodput; g["ttft"] != 500 || g["tpot"] != 50 || len(g) != 2 {
				return "goodput " + fmtMap(g)
			}
			return ""
		}},
		{"result floor", "", `  - {kind: floor, workload: decode, metric: p99_ttft_ms, max: 500}
  - {kind: floor, configs: [custom-ar], workload: decode, metric: output_throughput, min: 900}`, func(s *Spec) string {
			c := s.Checks[0]
			if p := c.Floor(); !c.IsResultFloor() || p.Workload != "decode" || *p.Max != 500 || c.Name != "floor p99_ttft_ms <= 500 (decode)" {
				return "check " + c.Name
			}
			if len(s.WorkloadsFor("nccl")) != 1 || len(s.WorkloadsFor("custom-ar")) != 1 {
				return "a result floor must make its configs run the workload"
			}
			return ""
		}},
		{"relative against baseline", "", `  - {kind: relative, config: nccl, of: baseline, metric: kv_cache_tokens, min_ratio: 0.95}`, func(s *Spec) string {
			c := s.Checks[0]
			if c.Relative().Of != OfBaseline || c.Scope() != ScopeCross || len(c.ConfigNames()) != 1 || c.Name != "relative nccl kv_cache_tokens >= 0.95 x baseline" {
				return "check " + c.Name
			}
			return ""
		}},
		{"dataset output lengths", "", `  - {kind: floor, metric: kv_cache_tokens, min: 1}`, func(s *Spec) string {
			if w := s.Workloads[1]; w.OutputLen != 0 || w.Dataset == "" {
				return "the chat workload must keep output_len unset (the dataset's lengths)"
			}
			return ""
		}},
		{"sampling", "    temperature: 0.7\n    top_p: 0.9\n    ignore_eos: false", `  - {kind: floor, metric: kv_cache_tokens, min: 1}`, func(s *Spec) string {
			w := s.Workloads[0]
			if w.Temperature == nil || *w.Temperature != 0.7 || w.TopP == nil || *w.TopP != 0.9 || w.IgnoreEOS {
				return "sampling not read"
			}
			if !s.Workloads[1].IgnoreEOS || s.Workloads[1].Temperature != nil {
				return "defaults: ignore_eos true, temperature unset (0)"
			}
			return ""
		}},
		{"chat endpoint", "", `  - {kind: floor, metric: kv_cache_tokens, min: 1}`, func(s *Spec) string {
			if s.Workloads[1].Endpoint != EndpointChat || s.Workloads[0].Endpoint != "" {
				return "endpoint " + s.Workloads[1].Endpoint
			}
			return ""
		}},
		{"workload configs", "    configs: [nccl, custom-ar]", `  - {kind: floor, metric: kv_cache_tokens, min: 1}`, func(s *Spec) string {
			for _, c := range []string{"nccl", "custom-ar"} {
				if ws := s.WorkloadsFor(c); len(ws) != 1 || ws[0].Name != "decode" {
					return c + " does not run decode"
				}
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(measurementBase, "%s", tc.workload, 1)
			src = strings.Replace(src, "%s", tc.checks, 1)
			s, err := Parse([]byte(src), "m.yaml")
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			if msg := tc.ok(s); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func fmtMap(m map[string]float64) string {
	var b strings.Builder
	for k, v := range m {
		b.WriteString(k + "=" + num.Exact(v) + " ")
	}
	return b.String()
}
