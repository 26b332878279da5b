package workload

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Semantics names the definitions a result was measured with: which tool, which version of its
// definitions (and how that version was known), and for each quantity whose definition differs
// between the tools, which definition applies. Every result reckon writes or imports carries one
// (Metadata.Semantics); `reckon compare` names the ones that differ between its two sides.
// docs/metrics.md lists each definition beside its source file.
type Semantics struct {
	// Tool is the client that measured: "reckon", "vllm bench serve", "sglang.bench_serving",
	// "aiperf", "genai-perf".
	Tool string `json:"tool"`
	// Version is the version whose definitions the result was read with, or "unknown".
	Version string `json:"version"`
	// Basis says how Version was known: recorded in the file, given with --tool-version,
	// inferred from the file's values (and which), or not recorded.
	Basis string `json:"basis"`
	// InputTokens, OutputTokens, ITL, E2EEnd and PeakConcurrency are definition codes
	// (Def* constants); "" when the tool's definition is not known.
	InputTokens     string `json:"input_tokens"`
	OutputTokens    string `json:"output_tokens"`
	ITL             string `json:"itl"`
	E2EEnd          string `json:"e2e_end"`
	PeakConcurrency string `json:"peak_concurrency,omitempty"`
	// Source is the tool's source file(s) the definitions were read from.
	Source string `json:"source"`
}

// Definition codes of Semantics.
const (
	// DefServerUsage: the server's own count (usage.prompt_tokens / usage.completion_tokens,
	// or SGLang's meta_info.completion_tokens).
	DefServerUsage = "server_usage"
	// DefServerUsageElseDataset: the server's usage.prompt_tokens when it sends one, else the
	// dataset's length.
	DefServerUsageElseDataset = "server_usage_else_dataset"
	// DefServerUsageElseRetokenized: usage.completion_tokens, else the client's tokenizer over
	// the generated text.
	DefServerUsageElseRetokenized = "server_usage_else_retokenized"
	// DefDataset: the length the dataset asked for (input: the prompt's length as sampled).
	DefDataset = "dataset"
	// DefRequested: the output length requested (max_tokens), not counted.
	DefRequested = "requested"
	// DefClientTokenizer: the client's tokenizer over the text.
	DefClientTokenizer = "client_tokenizer"

	// DefContentEvents: gaps between consecutive stream events that carry generated content;
	// a finish-only event with empty text and the usage event are not timing points.
	DefContentEvents = "content_events"
	// DefChoicesChunks: gaps between every chunk with a non-empty choices list, including a
	// trailing finish chunk with empty text (one more gap than tokens − 1 when the server sends one).
	DefChoicesChunks = "choices_chunks"
	// DefTextChunks: gaps between chunks whose choices[0].text is non-empty.
	DefTextChunks = "text_chunks"
	// DefPerTokenSplit: each chunk gap divided evenly over the tokens the chunk added.
	DefPerTokenSplit = "per_token_split"

	// DefLastContentEvent: E2E ends at the last event that carried content.
	DefLastContentEvent = "last_content_event"
	// DefLastChoicesChunk: E2E ends at the last chunk with a non-empty choices list (a
	// trailing empty finish chunk included; the usage chunk and [DONE] not).
	DefLastChoicesChunk = "last_choices_chunk"
	// DefLastLine: E2E ends at the last line read from the stream, data: [DONE] included.
	DefLastLine = "last_line"

	// DefPeakExact: max_concurrent_requests is the exact peak of successful requests in
	// flight (half-open [send, end) intervals).
	DefPeakExact = "exact_successful"
	// DefPeakBusiestSecond: max_concurrent_requests is the busiest whole second: every
	// successful request counts in each second bucket from its send to its end.
	DefPeakBusiestSecond = "busiest_second"
)

// defProse says what each definition code means, for compare's notes.
var defProse = map[string]string{
	DefServerUsage:                "the server's usage count",
	DefServerUsageElseDataset:     "the server's usage count, else the dataset's length",
	DefServerUsageElseRetokenized: "the server's usage count, else the client's retokenization",
	DefDataset:                    "the dataset's length",
	DefRequested:                  "the requested length (not counted)",
	DefClientTokenizer:            "the client's tokenizer",
	DefContentEvents:              "gaps between events that carry content",
	DefChoicesChunks:              "gaps between every chunk with choices, an empty finish chunk included",
	DefTextChunks:                 "gaps between chunks with non-empty text",
	DefPerTokenSplit:              "each chunk gap split evenly over its tokens",
	DefLastContentEvent:           "the last content event",
	DefLastChoicesChunk:           "the last chunk with choices",
	DefLastLine:                   "the last line read ([DONE] included)",
	DefPeakExact:                  "exact peak of successful requests",
	DefPeakBusiestSecond:          "busiest whole second",
}

// Source files of each tool's definitions (docs/metrics.md cites the same).
const (
	srcReckon = "workload/stats.go, engine/client (this repository)"
	srcVLLM   = "vllm-project/vllm vllm/benchmarks/serve.py (calculate_metrics), vllm/benchmarks/lib/endpoint_request_func.py (async_request_openai_completions)"
	srcSGLang = "sgl-project/sglang python/sglang/benchmark/metrics.py (do_calculate_metrics), benchmark/backends/oai_client.py and sglang_client.py, benchmark/datasets/common.py (compute_random_lens); older trees: python/sglang/bench_serving.py"
	srcAIPerf = "ai-dynamo/aiperf src/aiperf/metrics/types/ (inter_token_latency_metric.py, inter_chunk_latency_metric.py, request_latency_metric.py, output_sequence_length_metric.py)"
)

// ReckonSemantics is the definitions of reckon's own workload (docs/metrics.md).
func ReckonSemantics(version string) *Semantics {
	return &Semantics{Tool: "reckon", Version: version, Basis: "measured by this reckon",
		InputTokens: DefServerUsage, OutputTokens: DefServerUsage, ITL: DefContentEvents, E2EEnd: DefLastContentEvent,
		PeakConcurrency: DefPeakExact, Source: srcReckon}
}

// vllmSemantics is vllm bench serve's definitions; peak is the max_concurrent_requests
// definition ("" when the version is not known), version and basis as Semantics.
func vllmSemantics(version, basis, peak string) *Semantics {
	return &Semantics{Tool: "vllm bench serve", Version: version, Basis: basis,
		InputTokens: DefServerUsageElseDataset, OutputTokens: DefServerUsageElseRetokenized, ITL: DefChoicesChunks,
		E2EEnd: DefLastChoicesChunk, PeakConcurrency: peak, Source: srcVLLM}
}

// sglangSemantics is bench_serving's definitions for a backend: "sglang" (the native
// /generate API: the server's completion_tokens, chunk gaps split per token) or any
// OpenAI-compatible one (the requested length, gaps between non-empty text chunks); "" when the
// file does not name it.
func sglangSemantics(backend string) *Semantics {
	s := &Semantics{Tool: "sglang.bench_serving", Version: "unknown", Basis: "not recorded in the file: bench_serving writes no version",
		InputTokens: DefDataset, E2EEnd: DefLastLine, Source: srcSGLang}
	switch backend {
	case "sglang", "sglang-native":
		s.OutputTokens, s.ITL = DefServerUsage, DefPerTokenSplit
	case "":
	default:
		s.OutputTokens, s.ITL = DefRequested, DefTextChunks
	}
	return s
}

// aiperfSemantics is AIPerf's (and GenAI-Perf's) definitions as reckon maps them: its
// inter_chunk_latency is reckon's ITL, its request_latency ends at the last content response,
// its token counts come from its tokenizer unless it was told to use the server's.
func aiperfSemantics(tool, version string, serverTokens *bool) *Semantics {
	s := &Semantics{Tool: tool, Version: version, Basis: "recorded in the file",
		InputTokens: DefClientTokenizer, OutputTokens: DefClientTokenizer, ITL: DefContentEvents, E2EEnd: DefLastContentEvent, Source: srcAIPerf}
	if version == "" {
		s.Version, s.Basis = "unknown", "not recorded in the file"
	}
	if serverTokens != nil && *serverTokens {
		s.InputTokens, s.OutputTokens = DefServerUsage, DefServerUsage
	}
	return s
}

// DefinitionDiffs names each definition that differs between two results' semantics, with the
// metrics it affects, e.g. "ITL chunking (*_itl_ms): base reckon: gaps between events that
// carry content; head vllm bench serve: gaps between every chunk with choices, ...". A
// definition one side does not know is named as unknown when the other knows it.
func DefinitionDiffs(base, head *Semantics) []string {
	if base == nil || head == nil {
		var side []string
		if base == nil {
			side = append(side, "base")
		}
		if head == nil {
			side = append(side, "head")
		}
		return []string{fmt.Sprintf("%s: the definitions the result was measured with are not recorded (a reckon result written before semantics were recorded): unknown", strings.Join(side, " and "))}
	}
	dims := []struct {
		name    string
		metrics string
		get     func(*Semantics) string
	}{
		{"input token counting", "total_input_tokens, total_token_throughput", func(s *Semantics) string { return s.InputTokens }},
		{"output token counting", "total_output_tokens, output_throughput, total_token_throughput, *_tpot_ms", func(s *Semantics) string { return s.OutputTokens }},
		{"ITL chunking", "*_itl_ms", func(s *Semantics) string { return s.ITL }},
		{"E2E end point", "*_e2el_ms, *_tpot_ms", func(s *Semantics) string { return s.E2EEnd }},
		{"peak concurrency", "max_concurrent_requests", func(s *Semantics) string { return s.PeakConcurrency }},
	}
	prose := func(s *Semantics, code string) string {
		p := defProse[code]
		if code == "" {
			p = "unknown"
		}
		return s.Tool + ": " + p
	}
	var out []string
	for _, d := range dims {
		b, h := d.get(base), d.get(head)
		if b == h {
			continue
		}
		out = append(out, fmt.Sprintf("%s (%s): base %s; head %s", d.name, d.metrics, prose(base, b), prose(head, h)))
	}
	return out
}

// DatasetKind normalises a dataset name across tools, so that the same workload named by two
// tools compares equal: reckon's synthetic prompts ("synthetic(in=..)"), vLLM's and SGLang's
// "random" and SGLang's "random-ids" are "random"; "sharegpt" and a file whose name says ShareGPT
// are "sharegpt"; another file is its base name; "" stays unknown.
func DatasetKind(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	switch {
	case n == "":
		return ""
	case strings.HasPrefix(n, "synthetic("), n == "random", n == "random-ids":
		return "random"
	case n == "sharegpt", strings.Contains(filepath.Base(n), "sharegpt"):
		return "sharegpt"
	}
	return filepath.Base(n)
}

// vllmPeakVersion parses a vLLM version for the max_concurrent_requests definition: up to 0.28
// the busiest whole second; later versions the exact peak (the sweep-line of #56653, on main
// after 0.28.0). ok is false when v is not a version.
func vllmPeakVersion(v string) (peak string, ok bool) {
	v = strings.TrimPrefix(strings.TrimSpace(strings.ToLower(v)), "v")
	if v == "main" || v == "latest" {
		return DefPeakExact, true
	}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return "", false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return "", false
	}
	if major == 0 && minor <= 28 {
		return DefPeakBusiestSecond, true
	}
	return DefPeakExact, true
}
