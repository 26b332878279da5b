package wire

import (
	"encoding/json"
	"fmt"
	"math"
)

// GenerateRequest is the body of SGLang's native POST /generate (the subset reckon uses).
type GenerateRequest struct {
	Text           string         `json:"text,omitempty"`
	InputIDs       []int          `json:"input_ids,omitempty"`
	SamplingParams SamplingParams `json:"sampling_params"`
	ReturnLogprob  bool           `json:"return_logprob,omitempty"`
	TopLogprobsNum int            `json:"top_logprobs_num,omitempty"`
	LogprobStart   *int           `json:"logprob_start_len,omitempty"`
	Stream         bool           `json:"stream,omitempty"`
}

// SamplingParams are SGLang's per-request sampling settings.
type SamplingParams struct {
	MaxNewTokens *int     `json:"max_new_tokens,omitempty"`
	Temperature  *float64 `json:"temperature,omitempty"`
	IgnoreEOS    bool     `json:"ignore_eos,omitempty"`
	Stop         []string `json:"stop,omitempty"`
}

// GenerateResponse is SGLang's /generate answer (non-streaming).
type GenerateResponse struct {
	Text      string       `json:"text"`
	OutputIDs []int        `json:"output_ids,omitempty"`
	MetaInfo  GenerateMeta `json:"meta_info"`
}

// GenerateMeta carries token counts, logprobs and finish reason. Logprob entries are
// [logprob, token_id, token_text-or-null] triples as SGLang returns them.
type GenerateMeta struct {
	ID                  string         `json:"id"`
	PromptTokens        int            `json:"prompt_tokens"`
	CompletionTokens    int            `json:"completion_tokens"`
	FinishReason        map[string]any `json:"finish_reason,omitempty"`
	OutputTokenLogprobs [][]any        `json:"output_token_logprobs,omitempty"`
	InputTokenLogprobs  [][]any        `json:"input_token_logprobs,omitempty"`
	OutputTopLogprobs   [][][]any      `json:"output_top_logprobs,omitempty"`
	E2ELatency          float64        `json:"e2e_latency,omitempty"`
	// SpecVerifyCount is spec_verify_ct: the verify steps speculative decoding ran for this
	// request. SGLang sends it whenever the server runs speculative decoding; SpecVerifyReported
	// says whether the answer had it (decoding sets it; 0 alone cannot tell).
	SpecVerifyCount int `json:"spec_verify_ct,omitempty"`
	// SpecVerifyReported is true when the decoded answer carried spec_verify_ct (not sent).
	SpecVerifyReported bool `json:"-"`
	// SpecAcceptLength is spec_accept_length (SGLang 0.4 and later): the request's output tokens
	// per verify step.
	SpecAcceptLength *float64 `json:"spec_accept_length,omitempty"`
	// SpecAcceptTokenNum is spec_accept_token_num: draft tokens the target accepted.
	SpecAcceptTokenNum *int `json:"spec_accept_token_num,omitempty"`
	// SpecDraftTokenNum is spec_draft_token_num: draft tokens proposed for verification.
	SpecDraftTokenNum *int           `json:"spec_draft_token_num,omitempty"`
	Extra             map[string]any `json:"-"`
	// InputTopLogprobs are the top-k candidates of each prompt position (from logprob_start_len),
	// as SGLang returns them with top_logprobs_num; the first position has none (null or []).
	InputTopLogprobs [][][]any `json:"input_top_logprobs,omitempty"`
}

// ServerInfo is the subset of SGLang's GET /get_server_info (newer: /server_info) that reckon reads.
// Unknown keys are ignored by decoders; engines may send many more.
type ServerInfo struct {
	MemoryUsage         *MemoryUsage     `json:"memory_usage,omitempty"`
	MaxTotalNumTokens   int              `json:"max_total_num_tokens,omitempty"`
	TPSize              int              `json:"tp_size,omitempty"`
	Version             string           `json:"version,omitempty"`
	DisableCustomAR     bool             `json:"disable_custom_all_reduce"`
	AllReduceBackend    string           `json:"allreduce_backend,omitempty"`
	LastGenThroughput   float64          `json:"last_gen_throughput"`
	AvgSpecAcceptLength *float64         `json:"avg_spec_accept_length,omitempty"`
	InternalStates      []map[string]any `json:"internal_states,omitempty"`
}

// MemoryUsage is SGLang's per-rank memory breakdown in GB (GiB values) plus the KV token capacity.
type MemoryUsage struct {
	Weight        float64 `json:"weight"`
	KVCache       float64 `json:"kvcache"`
	TokenCapacity int     `json:"token_capacity"`
	CUDAGraph     float64 `json:"cuda_graph"`
}

// UnmarshalJSON decodes a meta_info object, noting whether spec_verify_ct was present and
// accepting the speculative counters as any integral JSON number (3 or 3.0).
func (m *GenerateMeta) UnmarshalJSON(data []byte) error {
	type plain GenerateMeta
	// The outer fields shadow plain's of the same JSON name, so one pass decodes everything.
	var v struct {
		plain
		SpecVerifyCt       *float64 `json:"spec_verify_ct"`
		SpecAcceptTokenNum *float64 `json:"spec_accept_token_num"`
		SpecDraftTokenNum  *float64 `json:"spec_draft_token_num"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*m = GenerateMeta(v.plain)
	count := func(name string, f *float64) (*int, error) {
		if f == nil {
			return nil, nil
		}
		if *f < 0 || *f != math.Trunc(*f) || *f > math.MaxInt32 {
			return nil, fmt.Errorf("meta_info.%s: %v is not a count", name, *f)
		}
		n := int(*f)
		return &n, nil
	}
	ct, err := count("spec_verify_ct", v.SpecVerifyCt)
	if err != nil {
		return err
	}
	if ct != nil {
		m.SpecVerifyCount, m.SpecVerifyReported = *ct, true
	}
	if m.SpecAcceptTokenNum, err = count("spec_accept_token_num", v.SpecAcceptTokenNum); err != nil {
		return err
	}
	if m.SpecDraftTokenNum, err = count("spec_draft_token_num", v.SpecDraftTokenNum); err != nil {
		return err
	}
	return nil
}
