package reporters

import (
	"fmt"
	"github.com/reckon-ci/reckon/spec"
	"math"
	"sort"
	"strings"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/num"
)

// Engine report keys the explanations and charts read (see Config.Engine).
const (
	keyKVTokens  = "kv_cache_tokens"
	keyKVGiB     = "kv_cache_gib"
	keyWeights   = "weights_gib"
	keyGraph     = "cuda_graph_gib"
	keyAvailable = "available_gpu_mem_gib"
	keyAllreduce = "allreduce"
	// keyARDisabled is why the engine did not use custom allreduce, when its log says.
	keyARDisabled = "custom_allreduce_disabled_reason"
)

// Explain builds the correlation text of a check: how the check's config differs from what it
// was compared with (the config its verdict names as Against, or the stored baseline's engine
// report), in KV cache capacity, the memory plan, the effective
// allreduce, peak GPU memory and latency. For example:
//
//	KV cache -91% (10.42 -> 0.90 GiB, 1212416 -> 104857 tokens); custom AR buffers 3.85 GiB (none in nccl); allreduce custom (nccl config: nccl)
//
// Without a comparison it states the config's own KV cache and allreduce. It returns "" when the
// check names no known config or nothing is known about it.
func Explain(r *gate.Run, c *gate.Check) string {
	if r == nil || c == nil {
		return ""
	}
	cfg := r.ConfigNamed(c.Config)
	if cfg == nil {
		return ""
	}
	ref, refName := comparison(r, c, cfg)
	var parts []string
	if ref == nil {
		if p := kvText(cfg.Engine, nil, ""); p != "" {
			parts = append(parts, p)
		}
		if ar := str(cfg.Engine, keyAllreduce); ar != "" {
			parts = append(parts, "allreduce "+ar)
		}
		if why := str(cfg.Engine, keyARDisabled); why != "" {
			parts = append(parts, "custom allreduce disabled: "+fitMessage(why, 160))
		}
		return strings.Join(parts, "; ")
	}
	if p := kvText(cfg.Engine, ref.engine, refName); p != "" {
		parts = append(parts, p)
	}
	parts = append(parts, memoryDiffs(cfg.Engine, ref.engine, refName)...)
	parts = append(parts, schedulerDiffs(cfg.Engine, ref.engine)...)
	if a, b := str(cfg.Engine, keyAllreduce), str(ref.engine, keyAllreduce); a != "" && a != b {
		switch {
		case b == "":
			parts = append(parts, "allreduce "+a)
		case ref.cfg != nil:
			parts = append(parts, fmt.Sprintf("allreduce %s (%s config: %s)", a, refName, b))
		default:
			parts = append(parts, fmt.Sprintf("allreduce %s (%s: %s)", a, refName, b))
		}
		if why := str(cfg.Engine, keyARDisabled); why != "" {
			parts = append(parts, "custom allreduce disabled: "+fitMessage(why, 160))
		}
	}
	if ref.cfg != nil {
		if hp, bp := maxOf(cfg.GPUPeakMiB), maxOf(ref.cfg.GPUPeakMiB); hp > 0 && bp > 0 && significant(hp/1024, bp/1024) {
			parts = append(parts, fmt.Sprintf("peak GPU memory %s (%.2f -> %.2f GiB)", num.Pct(hp/bp-1), bp/1024, hp/1024))
		}
		if c.Kind == string(spec.KindThroughput) || c.Kind == string(spec.KindLatency) || c.Kind == string(spec.KindRelative) {
			parts = append(parts, latencyDiffs(cfg, ref.cfg, c.Metric())...)
		}
	}
	return strings.Join(parts, "; ")
}

// explanation is what the renderers show for a check: the gate's own text, or, for a failed
// check, the computed correlation.
func explanation(r *gate.Run, c *gate.Check) string {
	if c.Explanation != "" {
		return c.Explanation
	}
	if c.EffectiveStatus() == gate.StatusFailed {
		return Explain(r, c)
	}
	return ""
}

type reference struct {
	engine map[string]any
	cfg    *gate.Config // nil for a stored baseline
}

// comparison finds what c compared cfg with: the config its verdict names as Against, else the
// stored baseline's engine report when there is one.
func comparison(r *gate.Run, c *gate.Check, cfg *gate.Config) (*reference, string) {
	if c.Against != "" {
		if o := r.ConfigNamed(c.Against); o != nil && o != cfg {
			return &reference{engine: o.Engine, cfg: o}, o.Name
		}
	}
	if cfg.BaselineEngine != nil {
		return &reference{engine: cfg.BaselineEngine}, "baseline"
	}
	return nil, ""
}

// kvText describes the KV cache, compared with ref when given.
func kvText(head, ref map[string]any, refName string) string {
	hg, okHG := mapNum(head, keyKVGiB)
	ht, okHT := mapNum(head, keyKVTokens)
	if ref == nil {
		switch {
		case okHG && okHT:
			return fmt.Sprintf("KV cache %.2f GiB (%s tokens)", hg, num.Format(ht))
		case okHG:
			return fmt.Sprintf("KV cache %.2f GiB", hg)
		case okHT:
			return fmt.Sprintf("KV cache %s tokens", num.Format(ht))
		}
		return ""
	}
	bg, okBG := mapNum(ref, keyKVGiB)
	bt, okBT := mapNum(ref, keyKVTokens)
	gib := okHG && okBG
	tok := okHT && okBT
	switch {
	case gib && tok && bg > 0:
		return fmt.Sprintf("KV cache %s (%.2f -> %.2f GiB, %s -> %s tokens)", num.Pct(hg/bg-1), bg, hg, num.Format(bt), num.Format(ht))
	case gib && bg > 0:
		return fmt.Sprintf("KV cache %s (%.2f -> %.2f GiB)", num.Pct(hg/bg-1), bg, hg)
	case tok && bt > 0:
		return fmt.Sprintf("KV cache %s (%s -> %s tokens)", num.Pct(ht/bt-1), num.Format(bt), num.Format(ht))
	case okHG:
		return fmt.Sprintf("KV cache %.2f GiB (%s: unknown)", hg, refName)
	}
	return ""
}

// memoryKeys returns the memory-plan keys of an engine report: the known components first, then
// every other numeric "*_gib" key, sorted.
func memoryKeys(ms ...map[string]any) []string {
	known := []string{keyWeights, keyGraph, keyAvailable}
	seen := map[string]bool{keyKVGiB: true}
	var keys []string
	for _, k := range known {
		for _, m := range ms {
			if _, ok := mapNum(m, k); ok {
				keys = append(keys, k)
				seen[k] = true
				break
			}
		}
	}
	var extra []string
	for _, m := range ms {
		for k := range m {
			if seen[k] || !strings.HasSuffix(k, "_gib") || isTotalKey(k) {
				continue
			}
			if _, ok := mapNum(m, k); ok {
				seen[k] = true
				extra = append(extra, k)
			}
		}
	}
	sort.Strings(extra)
	return append(keys, extra...)
}

// isTotalKey reports whether an engine key is a total rather than a component of the plan.
func isTotalKey(k string) bool {
	return strings.Contains(k, "total") || strings.Contains(k, "capacity") || strings.Contains(k, "peak") ||
		strings.HasPrefix(k, "gpu_mem")
}

// memLabel names an engine memory key for people.
func memLabel(k string) string {
	switch k {
	case keyWeights:
		return "weights"
	case keyGraph:
		return "CUDA graphs"
	case keyAvailable:
		return "free GPU memory"
	case keyKVGiB:
		return "KV cache"
	}
	base := strings.TrimSuffix(k, "_gib")
	if strings.Contains(base, "custom_ar") || strings.Contains(base, "custom_allreduce") {
		return "custom AR buffers"
	}
	return strings.ReplaceAll(base, "_", " ")
}

// significant reports whether two GiB amounts differ enough to mention (5% and 0.05 GiB).
func significant(a, b float64) bool {
	d := math.Abs(a - b)
	return d >= 0.05 && d >= 0.05*math.Max(math.Abs(a), math.Abs(b))
}

// memoryDiffs lists the memory-plan components that differ between head and ref.
func memoryDiffs(head, ref map[string]any, refName string) []string {
	var out []string
	for _, k := range memoryKeys(head, ref) {
		h, okH := mapNum(head, k)
		b, okB := mapNum(ref, k)
		switch {
		case okH && okB && significant(h, b):
			if b > 0 {
				out = append(out, fmt.Sprintf("%s %s (%.2f -> %.2f GiB)", memLabel(k), num.Pct(h/b-1), b, h))
			} else {
				out = append(out, fmt.Sprintf("%s %.2f GiB (%s: %.2f)", memLabel(k), h, refName, b))
			}
		case okH && !okB && h >= 0.05:
			out = append(out, fmt.Sprintf("%s %.2f GiB (none in %s)", memLabel(k), h, refName))
		case !okH && okB && b >= 0.05:
			out = append(out, fmt.Sprintf("no %s (%s: %.2f GiB)", memLabel(k), refName, b))
		}
	}
	return out
}

// latencyDiffs compares the median over trials of the median TTFT and TPOT.
func latencyDiffs(head, ref *gate.Config, skip string) []string {
	var out []string
	for _, k := range []struct{ key, label string }{{"median_tpot_ms", "median TPOT"}, {"median_ttft_ms", "median TTFT"}} {
		if k.key == skip {
			continue
		}
		// Only workloads both configs ran: different workloads are not comparable.
		shared := sharedWorkloads(head, ref)
		h, okH := median(trialValues(head, shared, k.key))
		b, okB := median(trialValues(ref, shared, k.key))
		if okH && okB && b > 0 && math.Abs(h/b-1) >= 0.1 {
			out = append(out, fmt.Sprintf("%s %s (%s -> %s ms)", k.label, num.Pct(h/b-1), num.Format(b), num.Format(h)))
		}
	}
	return out
}

// trialMedian returns the median over cfg's trials of a metric (all workloads).
func trialMedian(cfg *gate.Config, key string) (float64, bool) {
	return median(trialValues(cfg, nil, key))
}

// trialValues returns the finite values of a metric over cfg's trials of the given workloads
// (nil: all).
func trialValues(cfg *gate.Config, workloads map[string]bool, key string) []float64 {
	var vs []float64
	for _, t := range cfg.Trials {
		if workloads != nil && !workloads[t.Workload] {
			continue
		}
		if v, ok := t.Metrics[key]; ok && finite(v) {
			vs = append(vs, v)
		}
	}
	return vs
}

// sharedWorkloads returns the workloads both configs have trials of.
func sharedWorkloads(a, b *gate.Config) map[string]bool {
	inB := map[string]bool{}
	for _, t := range b.Trials {
		inB[t.Workload] = true
	}
	out := map[string]bool{}
	for _, t := range a.Trials {
		if inB[t.Workload] {
			out[t.Workload] = true
		}
	}
	return out
}

// runWorkloads returns the workloads of all trials of the run, in order of appearance.
func runWorkloads(r *gate.Run) []string {
	var out []string
	seen := map[string]bool{}
	for i := range r.Configs {
		for _, t := range r.Configs[i].Trials {
			if !seen[t.Workload] {
				seen[t.Workload] = true
				out = append(out, t.Workload)
			}
		}
	}
	return out
}

// throughputTexts describes a config's median output throughput per workload, computed as the
// verdicts compute it (throughputMedian), e.g. "1210 (n=5)" or "sharegpt: 506.9 (3 launches)";
// the workload is named only when the run has several.
func throughputTexts(r *gate.Run, cfg *gate.Config) []string {
	wls := runWorkloads(r)
	var out []string
	for _, w := range wls {
		m, n, _, ok := throughputMedian(cfg, w, "output_throughput")
		if !ok {
			continue
		}
		text := fmt.Sprintf("%s (%s)", num.Format(m), n)
		if len(wls) > 1 {
			text = w + ": " + text
		}
		out = append(out, text)
	}
	return out
}

func maxOf(vs []float64) float64 {
	m := 0.0
	for _, v := range vs {
		if finite(v) && v > m {
			m = v
		}
	}
	return m
}

// schedulerDiffs lists the capacity figures of the engine report that changed by 10% or more:
// a smaller KV cache shows up as fewer requests running at once.
func schedulerDiffs(head, ref map[string]any) []string {
	var out []string
	for _, k := range []struct{ key, label string }{
		{"max_running_requests", "max running requests"},
		{"max_concurrency", "max concurrency"},
		{"spec_accept_length", "speculative accept length"},
	} {
		h, okH := mapNum(head, k.key)
		b, okB := mapNum(ref, k.key)
		if okH && okB && b > 0 && math.Abs(h/b-1) >= 0.1 {
			out = append(out, fmt.Sprintf("%s %s (%s -> %s)", k.label, num.Pct(h/b-1), num.Format(b), num.Format(h)))
		}
	}
	return out
}

// median is num.Median with whether there was a value at all.
func median(vs []float64) (float64, bool) { return num.Median(vs), len(vs) > 0 }
