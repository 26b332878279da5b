package gate

import (
	"strings"
	"testing"
)

func f(x float64) *float64 { return &x }

func TestFloor(t *testing.T) {
	cases := []struct {
		name      string
		value     *float64
		min, max  *float64
		want      Outcome
		msgSubstr string
	}{
		{"above min", f(120000), f(100000), nil, Pass, "kv_cache_tokens 120000 within >= 100000"},
		{"below min", f(9000), f(100000), nil, Fail, "kv_cache_tokens 9000 < minimum 100000"},
		{"at min", f(100000), f(100000), nil, Pass, ""},
		{"above max", f(12.5), nil, f(10), Fail, "> maximum 10"},
		{"inside range", f(5), f(1), f(10), Pass, "[1, 10]"},
		{"nil value", nil, f(1), nil, Error, "engine log did not report kv_cache_tokens"},
		{"no bounds", f(1), nil, nil, Error, "neither a minimum nor a maximum"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Floor("kv-floor", "kv_cache_tokens", c.value, c.min, c.max)
			if v.Outcome != c.want {
				t.Fatalf("outcome %s, want %s (%s)", v.Outcome, c.want, v.Message)
			}
			if !strings.Contains(v.Message, c.msgSubstr) {
				t.Errorf("message %q lacks %q", v.Message, c.msgSubstr)
			}
			// The kind is the caller's (the check's entry), never the judge's.
			if v.Kind != "" || strings.Contains(v.Message, "\n") {
				t.Errorf("kind %q or multi-line message %q", v.Kind, v.Message)
			}
		})
	}
}

func TestRelative(t *testing.T) {
	// The story: custom allreduce on PCIe shrinks the KV cache from 10.42 to 0.90 GiB.
	v := Relative("kv-vs-nccl", "kv_cache_gib", f(0.90), f(10.42), "nccl", f(0.9), nil)
	if v.Outcome != Fail || !strings.Contains(v.Message, "vs nccl 10.42") || !strings.Contains(v.Message, "-91%") {
		t.Fatalf("got %s: %s", v.Outcome, v.Message)
	}
	if got := v.Metrics["ratio"]; got < 0.086 || got > 0.087 {
		t.Errorf("ratio metric %v", got)
	}
	if v := Relative("kv-vs-nccl", "kv_cache_gib", f(10.0), f(10.42), "nccl", f(0.9), nil); v.Outcome != Pass {
		t.Fatalf("0.96x should pass: %s", v.Message)
	}
	if v := Relative("r", "x", f(1), f(0), "nccl", f(0.9), nil); v.Outcome != Error {
		t.Errorf("zero reference: %s", v.Outcome)
	}
	if v := Relative("r", "x", f(1), nil, "nccl", f(0.9), nil); v.Outcome != Error || !strings.Contains(v.Message, "nccl did not report x") {
		t.Errorf("missing reference: %s %s", v.Outcome, v.Message)
	}
	if v := Relative("r", "x", f(2), f(1), "nccl", nil, f(1.5)); v.Outcome != Fail || !strings.Contains(v.Message, "above 1.5x") {
		t.Errorf("ceiling: %s %s", v.Outcome, v.Message)
	}
}

func TestExpectEqual(t *testing.T) {
	if v := ExpectEqual("ar-backend", "effective_allreduce", "custom", "custom"); v.Outcome != Pass {
		t.Errorf("equal: %s", v.Outcome)
	}
	v := ExpectEqual("ar-backend", "effective_allreduce", "nccl", "custom")
	if v.Outcome != Fail || !strings.Contains(v.Message, `effective_allreduce is "nccl", expected "custom"`) {
		t.Errorf("fallback: %s %s", v.Outcome, v.Message)
	}
	if v := ExpectEqual("ar-backend", "effective_allreduce", "", "custom"); v.Outcome != Error {
		t.Errorf("missing: %s", v.Outcome)
	}
}
