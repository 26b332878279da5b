package spec

import (
	"math"

	"github.com/goccy/go-yaml/ast"
)

// The workloads and numerics sections: the traffic reckon drives and the prompts of the
// numerics probe.

func (b *builder) workload(m *mapping) (*Workload, ast.Node) {
	w := &Workload{Trials: DefaultTrials, Seed: DefaultSeed, RequestTimeout: Duration(DefaultRequestTimeout)}
	w.Line, _ = position(m.node)
	var nameNode ast.Node
	w.Name, nameNode = b.nameField(m, "workload")
	w.Tags = b.tags(m)
	w.Concurrency, _ = m.integer("concurrency", 1)
	if r := m.numberIn("request_rate", math.SmallestNonzeroFloat64, math.MaxFloat64, "a positive rate in requests/s"); r != nil {
		w.RequestRate = *r
	}
	switch {
	case m.has("concurrency") && m.has("request_rate"):
		v, _ := m.get("request_rate")
		m.badc(CodeConflict, v, "request_rate", "concurrency and request_rate exclude each other: set one (closed loop) or the other (open loop)")
	case !m.has("concurrency") && !m.has("request_rate"):
		m.missing("concurrency", "the requests in flight, or request_rate for an open loop")
	}
	if r := m.numberIn("burstiness", math.SmallestNonzeroFloat64, math.MaxFloat64, "a positive gamma shape (1 = Poisson)"); r != nil {
		w.Burstiness = *r
		if !m.has("request_rate") {
			v, _ := m.get("burstiness")
			m.badc(CodeConflict, v, "burstiness", "applies only to an open loop (set request_rate)")
		}
	} else if m.has("request_rate") {
		w.Burstiness = 1
	}
	var ok bool
	if w.NumPrompts, ok = m.integer("num_prompts", 1); !ok && !m.has("num_prompts") {
		m.missing("num_prompts", "the number of measured requests per trial")
	}
	w.Dataset, _ = m.str("dataset")
	if w.InputLen, ok = m.integer("input_len", 1); !ok && !m.has("input_len") && w.Dataset == "" {
		m.missing("input_len", "the prompt length in tokens, or a dataset")
	}
	if w.OutputLen, ok = m.integer("output_len", 1); !ok && !m.has("output_len") && w.Dataset == "" {
		m.missing("output_len", "the output length in tokens, or a dataset whose records give theirs (ShareGPT replies)")
	}
	b.workloadExtras(m, w)
	w.Warmup, _ = m.integer("warmup", 0)
	if n, ok := m.integer("trials", 1); ok {
		w.Trials = n
	}
	if n, ok := m.integer("launches", 1); ok {
		w.Launches = n
		if b.launchesAt == nil {
			b.launchesAt = map[string]ast.Node{}
		}
		v, _ := m.get("launches")
		b.launchesAt[w.Name] = v
		if n > 1 && m.has("max_trials") {
			b.errorc(CodeConflict, v, m.field("launches"), "launches %d and max_trials exclude each other: with relaunches the unit is a launch, so add launches rather than sequential trials", n)
		}
	}
	w.MaxTrials = w.Trials
	if n, ok := m.integer("max_trials", 1); ok {
		if n < w.Trials {
			v, _ := m.get("max_trials")
			m.bad(v, "max_trials", "expected at least trials (%d), got %d", w.Trials, n)
		} else {
			w.MaxTrials = n
		}
	}
	if v, ok := m.get("seed"); ok {
		if iv, isInt := v.(*ast.IntegerNode); isInt {
			switch x := iv.Value.(type) {
			case int64:
				w.Seed = x
			case uint64:
				w.Seed = int64(x)
			}
		} else {
			m.bad(v, "seed", "expected an integer, got %s", describe(v))
		}
	}
	if d, ok := m.duration("request_timeout"); ok {
		w.RequestTimeout = d
	}
	m.workloadBounds(w)
	m.done()
	return w, nameNode
}

func (b *builder) numerics(m *mapping) *Numerics {
	n := &Numerics{MaxTokens: DefaultMaxTokens, TopLogprobs: DefaultTopLogprobs, BatchSize: DefaultProbeBatch}
	n.Prompts, _ = m.reqStr("prompts", "a JSONL file of prompts")
	if v, ok := m.integer("max_tokens", 1); ok {
		n.MaxTokens = v
	}
	if v, ok := m.integer("top_logprobs", 1); ok {
		if v > 20 {
			x, _ := m.get("top_logprobs")
			m.bad(x, "top_logprobs", "expected at most 20 (the engines' limit), got %d", v)
		} else {
			n.TopLogprobs = v
		}
	}
	if v, ok := m.integer("batch_size", 0); ok {
		if v > 0 && v < 8 {
			x, _ := m.get("batch_size")
			m.bad(x, "batch_size", "expected 0 (no under-load pass) or at least 8 sequences at once, got %d (the one-at-a-time pass always runs)", v)
		} else {
			n.BatchSize = v
		}
	}
	if x, ok := m.get("prompt_logprobs"); ok {
		m.bad(x, "prompt_logprobs", "removed: every config now scores the same teacher-forced sequences (prompt and continuation), so there is nothing to switch")
	}
	m.done()
	return n
}

// goodputKeys are the SLO keys of a workload's goodput section, with the metric each bounds.
var goodputKeys = map[string]string{"ttft_ms": "ttft", "tpot_ms": "tpot", "e2el_ms": "e2el"}

// workloadExtras reads the workload fields that shape each request and what is measured:
// goodput SLOs, sampling settings, the endpoint, and the configs that run the workload.
func (b *builder) workloadExtras(m *mapping, w *Workload) {
	w.IgnoreEOS = true
	if g := m.sub("goodput"); g != nil {
		w.Goodput = map[string]float64{}
		for _, key := range []string{"ttft_ms", "tpot_ms", "e2el_ms"} {
			if v := g.numberIn(key, math.SmallestNonzeroFloat64, math.MaxFloat64, "a positive number of milliseconds"); v != nil {
				w.Goodput[goodputKeys[key]] = *v
			}
		}
		if len(g.entries) == 0 {
			v, _ := m.get("goodput")
			m.bad(v, "goodput", "expected at least one SLO: ttft_ms, tpot_ms or e2el_ms")
		}
		g.what = "goodput SLOs"
		g.done()
	}
	w.Temperature = m.numberIn("temperature", 0, math.MaxFloat64, "a temperature >= 0 (0 = greedy)")
	w.TopP = m.numberIn("top_p", math.SmallestNonzeroFloat64, 1, "a probability in (0, 1]")
	if v := m.boolean("ignore_eos"); v != nil {
		w.IgnoreEOS = *v
	}
	if e, ok := m.enum("endpoint", false, EndpointCompletions, EndpointChat); ok {
		w.Endpoint = e
	}
	if m.has("configs") || m.has("config") {
		w.Configs = b.refList(m)
	} else {
		m.known = append(m.known, "config", "configs")
	}
}
