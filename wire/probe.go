package wire

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
	BatchSize int              `json:"batch_size,omitempty"`
	Prompts   []NumericsPrompt `json:"prompts"`
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

// AllReduceProbeSchema is the value of AllReduceProbe.Schema for this version of the contract.
const AllReduceProbeSchema = "reckon.allreduce-probe/v1"

// AllReduceProbe is the contract for any op-level allreduce probe (the reference engine's
// `refengine probe-allreduce --json`, or ci/probes/torch_allreduce_probe.py on real GPUs): per
// message size, dtype and input kind, each algorithm's error against a float64 reference and
// against the other algorithms. The gate's op-level check reads it (docs/allreduce-probe.md).
type AllReduceProbe struct {
	Schema    string               `json:"schema"`
	Source    string               `json:"source"` // e.g. "refengine", "torch.distributed"
	WorldSize int                  `json:"world_size"`
	Device    string               `json:"device,omitempty"`
	Reference string               `json:"reference"` // name of the reference algorithm, e.g. "nccl" or "ring"
	Results   []AllReduceProbeCase `json:"results"`
}

// AllReduceProbeCase is one (size, dtype, inputs) measurement.
type AllReduceProbeCase struct {
	SizeBytes  int64                     `json:"size_bytes"`
	Elements   int64                     `json:"elements"`
	DType      string                    `json:"dtype"`  // "float32" | "bfloat16" | "float16"
	Inputs     string                    `json:"inputs"` // "random" | "integer"
	Algorithms []AllReduceProbeAlgorithm `json:"algorithms"`
	// Pairs compares algorithms with each other (both orders are not repeated).
	Pairs []AllReduceProbePair `json:"pairs"`
}

// AllReduceProbeAlgorithm is one algorithm's error against the float64 reference sum.
type AllReduceProbeAlgorithm struct {
	Name      string   `json:"name"` // "ring", "one_shot", "nccl", "symm_mem_one_shot", ...
	MaxAbsErr float64  `json:"max_abs_err"`
	MaxRelErr float64  `json:"max_rel_err"`
	Exact     bool     `json:"exact"` // bit-identical to the reference rounded to dtype
	MedianUs  *float64 `json:"median_us,omitempty"`
	Skipped   string   `json:"skipped,omitempty"` // why this algorithm did not run at this size
	// RanksIdentical: every rank ended with bit-identical output (absent when not checked).
	RanksIdentical *bool `json:"ranks_identical,omitempty"`
}

// AllReduceProbePair compares two algorithms' outputs with each other.
type AllReduceProbePair struct {
	A          string  `json:"a"`
	B          string  `json:"b"`
	MaxAbsDiff float64 `json:"max_abs_diff"`
	MaxRelDiff float64 `json:"max_rel_diff"`
	Identical  bool    `json:"identical"`
}
