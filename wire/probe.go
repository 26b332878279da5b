package wire

import "fmt"

// NumericsProbe is the file the numerics probe writes per config (see workload) and the
// equivalence check reads (see gate): for each prompt, the free-running greedy output with top-k
// logprobs, and the teacher-forced scores of one token sequence shared by every config of the
// run (the prompt followed by the greedy continuation of the config named in ForcedFrom), scored
// one request at a time and again under load. Token ids are the engine's.
type NumericsProbe struct {
	Schema string `json:"schema"` // "reckon.numerics/v1"
	Engine string `json:"engine,omitempty"`
	Config string `json:"config"`
	TopK   int    `json:"top_k"`
	DType  string `json:"dtype,omitempty"`   // the dtype the config ran in, when known
	TPSize int    `json:"tp_size,omitempty"` // its tensor-parallel size, when known
	// ForcedFrom names the config whose greedy continuations form the teacher-forced sequences.
	ForcedFrom string `json:"forced_from,omitempty"`
	// BatchSize is how many forced sequences were sent at once in the under-load pass (0: none).
	BatchSize int `json:"batch_size,omitempty"`
	// Speculative records the evidence of whether speculative decoding ran for the probe's
	// greedy requests (see ProbeSpeculative.Ran); the probe records it, the gate judges it.
	Speculative *ProbeSpeculative `json:"speculative,omitempty"`
	Prompts     []NumericsPrompt  `json:"prompts"`
}

// NumericsSchema is the value of NumericsProbe.Schema for this version of the contract.
const NumericsSchema = "reckon.numerics/v1"

// NumericsPrompt is one prompt's probe result.
type NumericsPrompt struct {
	ID     string `json:"id"`
	Prompt string `json:"prompt"`
	// Output: the greedy continuation, one entry per generated token.
	Output []TokenLogprob `json:"output"`
	// PromptLogprobs: teacher-forced logprobs of the prompt tokens (echo); the first token has none
	// and is omitted, so entry i is the logprob of prompt token i+1.
	PromptLogprobs []TokenLogprob `json:"prompt_logprobs,omitempty"`
	// PromptTokens: the prompt's token ids (all of them, including the first).
	PromptTokens []int `json:"prompt_tokens,omitempty"`
	// ForcedTokens: the teacher-forced sequence (the prompt's tokens, then ForcedFrom's greedy
	// continuation), identical in every config of the run.
	ForcedTokens []int `json:"forced_tokens,omitempty"`
	// Forced: the scores of ForcedTokens sent alone; entry i is position i+1 (its token is
	// ForcedTokens[i+1]).
	Forced []TokenLogprob `json:"forced,omitempty"`
	// ForcedBatched: the same scores with the sequence sent among BatchSize concurrent ones.
	ForcedBatched []TokenLogprob `json:"forced_batched,omitempty"`
	// Spec is the speculative-decoding evidence SGLang reported for this prompt's greedy request
	// (absent when it reported none).
	Spec *PromptSpec `json:"spec,omitempty"`
	// Clipped lists the token ids the server reported as another id (SGLang reports ids >=
	// vocab_size-1 as 0); the probe kept the id it sent.
	Clipped []ClippedID `json:"clipped_ids,omitempty"`
}

// PromptSpec is one greedy request's speculative-decoding counters from SGLang's meta_info.
type PromptSpec struct {
	// CompletionTokens is meta_info.completion_tokens.
	CompletionTokens int `json:"completion_tokens"`
	// VerifySteps is meta_info.spec_verify_ct.
	VerifySteps int `json:"verify_steps"`
	// AcceptLength is meta_info.spec_accept_length, when sent.
	AcceptLength *float64 `json:"accept_length,omitempty"`
	// AcceptedTokens is meta_info.spec_accept_token_num, when sent.
	AcceptedTokens *int `json:"accepted_tokens,omitempty"`
	// DraftTokens is meta_info.spec_draft_token_num, when sent.
	DraftTokens *int `json:"draft_tokens,omitempty"`
}

// ClippedID is a token the server named by another id than the one it was given.
type ClippedID struct {
	// In is the sequence: "prompt" (PromptTokens), "output" (Output) or "forced" (ForcedTokens).
	In string `json:"in"`
	// Index is the position in that sequence.
	Index int `json:"index"`
	// Token is the id sent (or, for output, output_ids' id), which the probe kept.
	Token int `json:"token"`
	// Reported is the id the server's logprobs named.
	Reported int `json:"reported"`
}

// Sources of ProbeSpeculative evidence.
const (
	// SpecSourceSGLang: per-request meta_info spec_verify_ct (and spec_accept_token_num, ...).
	SpecSourceSGLang = "sglang_meta_info"
	// SpecSourceVLLM: the vllm:spec_decode_* counters of /metrics, read before and after.
	SpecSourceVLLM = "vllm_metrics"
	// SpecSourceNone: neither source was available.
	SpecSourceNone = "none"
)

// ProbeSpeculative summarises the speculative-decoding evidence of a probe's greedy requests.
type ProbeSpeculative struct {
	// Source is the evidence used: SpecSourceSGLang, SpecSourceVLLM or SpecSourceNone.
	Source string `json:"source"`
	// Requests is how many greedy generation requests the probe sent (one per prompt).
	Requests int `json:"requests"`
	// OutputTokens is the tokens those requests generated (completion_tokens summed).
	OutputTokens int `json:"output_tokens"`
	// VerifyRequests is how many of them reported spec_verify_ct (SGLang).
	VerifyRequests int `json:"verify_requests,omitempty"`
	// VerifySteps is spec_verify_ct summed over those requests (SGLang).
	VerifySteps int `json:"verify_steps,omitempty"`
	// VerifiedTokens is completion_tokens summed over the requests that reported spec_verify_ct.
	VerifiedTokens int `json:"verified_tokens,omitempty"`
	// AcceptedTokens is spec_accept_token_num summed, when any request sent it (SGLang).
	AcceptedTokens *int `json:"accepted_tokens,omitempty"`
	// DraftTokens is spec_draft_token_num summed, when any request sent it (SGLang).
	DraftTokens *int `json:"draft_tokens,omitempty"`
	// Metrics are the vLLM counters' increase over the probe (vLLM), when /metrics had them.
	Metrics *SpecMetricsDelta `json:"metrics,omitempty"`
	// MetricsNote says why the vLLM counters are absent (e.g. /metrics answered 404, or had no
	// vllm:spec_decode_* series).
	MetricsNote string `json:"metrics_note,omitempty"`
}

// SpecMetricsDelta is the increase of vLLM's speculative-decoding counters (summed over their
// label sets) between a /metrics read before the probe's first request and one after its last.
// The counters are server-wide: other traffic during the probe would be counted too.
type SpecMetricsDelta struct {
	// Drafts is vllm:spec_decode_num_drafts_total's increase.
	Drafts float64 `json:"drafts"`
	// DraftTokens is vllm:spec_decode_num_draft_tokens_total's increase.
	DraftTokens float64 `json:"draft_tokens"`
	// AcceptedTokens is vllm:spec_decode_num_accepted_tokens_total's increase.
	AcceptedTokens float64 `json:"accepted_tokens"`
}

// Ran says whether speculative decoding demonstrably ran for the probe's greedy requests, with
// the reason. SGLang: a request's first token comes from prefill and every verify step yields at
// least one token, so without acceptance completion_tokens = 1 + spec_verify_ct; it ran when any
// draft token was accepted (spec_accept_token_num > 0) or the requests that reported
// spec_verify_ct produced more tokens than 1 + their verify steps. vLLM: the drafts counter rose.
// It is false, with the reason, otherwise, and "no evidence" when neither source exists.
func (s *ProbeSpeculative) Ran() (bool, string) {
	if s == nil {
		return false, "no evidence: the probe recorded no speculative-decoding summary"
	}
	switch s.Source {
	case SpecSourceSGLang:
		if s.AcceptedTokens != nil && *s.AcceptedTokens > 0 {
			return true, fmt.Sprintf("SGLang accepted %d draft tokens over %d verify steps in %d of %d requests (spec_accept_token_num)",
				*s.AcceptedTokens, s.VerifySteps, s.VerifyRequests, s.Requests)
		}
		if s.VerifySteps > 0 && s.VerifiedTokens > s.VerifySteps+s.VerifyRequests {
			return true, fmt.Sprintf("SGLang produced %d tokens in %d verify steps over %d requests (one prefill token each): more than one token per step (spec_verify_ct)",
				s.VerifiedTokens, s.VerifySteps, s.VerifyRequests)
		}
		if s.VerifySteps == 0 {
			return false, fmt.Sprintf("SGLang reported spec_verify_ct = 0 for all %d requests that sent it (%d output tokens): no verify step ran", s.VerifyRequests, s.VerifiedTokens)
		}
		return false, fmt.Sprintf("SGLang produced %d tokens in %d verify steps over %d requests: no more than one token per step, so no draft token was accepted", s.VerifiedTokens, s.VerifySteps, s.VerifyRequests)
	case SpecSourceVLLM:
		if s.Metrics == nil {
			return false, "no evidence: vLLM /metrics counters were not read"
		}
		if s.Metrics.Drafts > 0 {
			return true, fmt.Sprintf("vLLM ran %g drafts (%g draft tokens, %g accepted) during the probe's %d requests (%d output tokens)",
				s.Metrics.Drafts, s.Metrics.DraftTokens, s.Metrics.AcceptedTokens, s.Requests, s.OutputTokens)
		}
		return false, fmt.Sprintf("vLLM's vllm:spec_decode_num_drafts_total did not rise during the probe's %d requests (%d output tokens); vLLM before about 0.14 does not speculate requests that ask for logprobs (is_spec_decode_unsupported)",
			s.Requests, s.OutputTokens)
	}
	why := "no evidence of speculative decoding: no request reported meta_info.spec_verify_ct and no vllm:spec_decode_* counter delta was read"
	if s.MetricsNote != "" {
		why += " (" + s.MetricsNote + ")"
	}
	return false, why
}

// TokenLogprob is one position: the chosen token, its logprob, and the top-k alternatives.
type TokenLogprob struct {
	Token   int              `json:"token"`
	Text    string           `json:"text,omitempty"`
	Logprob float64          `json:"logprob"`
	Top     []TokenCandidate `json:"top,omitempty"`
}

// TokenCandidate is one of the top-k tokens at a position.
type TokenCandidate struct {
	Token   int     `json:"token"`
	Text    string  `json:"text,omitempty"`
	Logprob float64 `json:"logprob"`
}

// AllReduceProbeSchema is the value of AllReduceProbe.Schema for the current version of the
// contract (v2: calibrated, with the fixed-order oracle and the controls).
const AllReduceProbeSchema = "reckon.allreduce-probe/v2"

// AllReduceProbeSchemaV1 is the schema of the first, uncalibrated version of the contract (errors
// against the float64 sum only). Such files are still read, and judged by the fixed per-dtype
// tolerances.
const AllReduceProbeSchemaV1 = "reckon.allreduce-probe/v1"

// AllReduceProbe is the contract for any op-level allreduce probe (the reference engine's
// `refengine probe-allreduce --json`, or ci/probes/torch_allreduce_probe.py on GPUs or on CPUs with
// gloo): per message size, dtype, input kind and call pattern, each algorithm's error against the
// fixed-order oracle and the float64 sum, and against the reference algorithm. The gate's
// op-level check reads it (docs/allreduce-probe.md).
type AllReduceProbe struct {
	Schema    string `json:"schema"`
	Source    string `json:"source"` // e.g. "refengine", "torch.distributed"
	WorldSize int    `json:"world_size"`
	Device    string `json:"device,omitempty"`
	Reference string `json:"reference"` // name of the reference algorithm, e.g. "nccl" or "ring"
	// Calibration (v2, required there) says what the oracle is and what role each algorithm plays.
	Calibration *AllReduceProbeCalibration `json:"calibration,omitempty"`
	Results     []AllReduceProbeCase       `json:"results"`
}

// AllReduceProbeCalibration is the part of a v2 probe that makes its verdict calibrated: the
// oracle every algorithm was scored against and the role of every algorithm.
type AllReduceProbeCalibration struct {
	// Oracle describes the fixed-order oracle (all_gather, float32 sum in rank order, one
	// rounding to the dtype).
	Oracle string               `json:"oracle"`
	Roles  []AllReduceProbeRole `json:"roles"`
}

// The roles of AllReduceProbeRole.Role.
const (
	// RoleReference is the reference algorithm (NCCL's default, the engine's ring); it is also a
	// negative control.
	RoleReference = "reference"
	// RoleTwin is a correct algorithm that sums in another order (NCCL_ALGO=Tree, another channel
	// count): a negative control, which the rule must pass.
	RoleTwin = "twin"
	// RoleCandidate is an algorithm under test (a custom allreduce).
	RoleCandidate = "candidate"
	// RolePositiveControl is a candidate with a fault injected around its op, which the rule must
	// fail.
	RolePositiveControl = "positive_control"
)

// AllReduceProbeRole is one algorithm's role in a calibrated probe.
type AllReduceProbeRole struct {
	Algorithm string `json:"algorithm"`
	Role      string `json:"role"` // reference | twin | candidate | positive_control
	// Setting says how the algorithm was made to run (e.g. "NCCL_ALGO=Tree"), free text.
	Setting string `json:"setting,omitempty"`
	// Of (positive_control) names the candidate the fault was injected around.
	Of string `json:"of,omitempty"`
	// Fault (positive_control): scale, drop_peer, stale or another injected fault.
	Fault string `json:"fault,omitempty"`
	// AboveBytes (positive_control): the fault applies only to messages above this size.
	AboveBytes int64 `json:"above_bytes,omitempty"`
	// MaxBytes (candidate): the largest message its custom path takes (0: no limit); above it the
	// engine sends the message to NCCL, so the candidate is not engaged there.
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

// AllReduceProbeCase is one (size, dtype, inputs, call pattern) measurement.
type AllReduceProbeCase struct {
	SizeBytes int64  `json:"size_bytes"`
	Elements  int64  `json:"elements"`
	DType     string `json:"dtype"`  // "float32" | "bfloat16" | "float16"
	Inputs    string `json:"inputs"` // "random" | "integer"; v2 also "wide" | "order_sensitive"
	// Mode (v2): the call pattern: "eager", "queued" (CallsPerSync calls before one sync) or
	// "cuda_graph" (CallsPerSync calls captured in one graph, replayed Calls/CallsPerSync times).
	Mode string `json:"mode,omitempty"`
	// Calls (v2): how many calls of each algorithm were scored, each on a fresh payload.
	Calls int64 `json:"calls,omitempty"`
	// CallsPerSync (v2): calls between two synchronisations (1 for eager).
	CallsPerSync int64                     `json:"calls_per_sync,omitempty"`
	Algorithms   []AllReduceProbeAlgorithm `json:"algorithms"`
	// Pairs compares algorithms with each other (both orders are not repeated).
	Pairs []AllReduceProbePair `json:"pairs"`
}

// AllReduceProbeAlgorithm is one algorithm's error against the float64 reference sum and (v2)
// against the fixed-order oracle.
type AllReduceProbeAlgorithm struct {
	Name      string   `json:"name"` // "ring", "one_shot", "nccl", "symm_mem_one_shot", ...
	MaxAbsErr float64  `json:"max_abs_err"`
	MaxRelErr float64  `json:"max_rel_err"`
	Exact     bool     `json:"exact"` // bit-identical to the reference rounded to dtype
	MedianUs  *float64 `json:"median_us,omitempty"`
	Skipped   string   `json:"skipped,omitempty"` // why this algorithm did not run at this size
	// RanksIdentical: every rank ended with bit-identical output (absent when not checked).
	RanksIdentical *bool `json:"ranks_identical,omitempty"`
	// NRMSE (v2): sqrt(sum (out-O)^2 / sum O^2) against the oracle O, over every element of every
	// rank and call.
	NRMSE *float64 `json:"nrmse,omitempty"`
	// MaxULP (v2): the largest distance to the oracle in units in the last place of the dtype.
	MaxULP *float64 `json:"max_ulp,omitempty"`
	// EngagedCalls (v2, candidates and positive controls): how many of the case's calls ran on
	// the candidate's own path (its call counter or the backend's report).
	EngagedCalls *int64 `json:"engaged_calls,omitempty"`
	// FaultedCalls (v2, positive controls): how many calls the injected fault altered.
	FaultedCalls *int64 `json:"faulted_calls,omitempty"`
}

// AllReduceProbePair compares two algorithms' outputs with each other.
type AllReduceProbePair struct {
	A          string  `json:"a"`
	B          string  `json:"b"`
	MaxAbsDiff float64 `json:"max_abs_diff"`
	MaxRelDiff float64 `json:"max_rel_diff"`
	Identical  bool    `json:"identical"`
}
