// Package sched is the reference engine's scheduler: continuous batching over a paged KV pool with
// chunked prefill, a running-request limit, KV admission control, greedy or seeded sampling with
// logprobs, stop conditions, and EAGLE-style speculative decoding with lossless verification.
package sched

import (
	"context"
	"fmt"
)

// Request is one generation request.
type Request struct {
	ID          string
	Prompt      []int
	MaxNew      int
	Temperature float64 // 0 = greedy
	TopP        float64 // 0 or 1 = off
	Seed        *int64  // sampling seed; nil = derived from the engine's random seed
	IgnoreEOS   bool
	MinNew      int
	Stop        []string
	// TopLogprobs is the number of alternatives to return per position; Logprobs asks for the
	// chosen token's logprob at all.
	Logprobs    bool
	TopLogprobs int
	// PromptLogprobs asks for teacher-forced logprobs of the prompt tokens (echo).
	PromptLogprobs bool
	// NoSpec decodes the request one token per step without speculation even when the server
	// speculates (vLLM before ~0.14 does so for requests with logprobs); its tokens do not move
	// the speculative counters.
	NoSpec bool
	Ctx    context.Context

	out chan Event
}

// TokenLogprob is one candidate token with its log-probability.
type TokenLogprob struct {
	Token   int
	Logprob float64
}

// Position is the logprob information of one token position.
type Position struct {
	Token   int
	Logprob float64
	// Rank is Token's 1-based rank among all tokens by logprob (vLLM's prompt_logprobs rank).
	Rank int
	Top  []TokenLogprob
}

// Event is what the scheduler sends back for a request: prompt logprobs (once, first), then one
// event per generated token, then a final event with Done set.
type Event struct {
	Prompt []Position // teacher-forced logprobs of prompt tokens 1..n-1 (when asked)
	Token  int        // generated token (when Generated)
	// Generated marks a token event.
	Generated bool
	Pos       *Position // logprobs of the generated token (when asked)
	Done      bool
	// FinishReason: "stop" (EOS or a stop string), "length" or "abort".
	FinishReason string
	// MatchedStop is the stop string that ended the request; StopAt is the byte offset in the
	// generated text where it begins (the text must be cut there).
	MatchedStop                    string
	StopAt                         int
	PromptTokens, CompletionTokens int
	Err                            error
	// SpecVerifies counts the verification steps of a speculative request; SpecDraftTokens the
	// draft tokens proposed to them and SpecAcceptedDrafts those the target accepted.
	SpecVerifies       int
	SpecDraftTokens    int
	SpecAcceptedDrafts int
}

// Events is the channel on which the request's events arrive; it is closed after the Done event.
func (r *Request) Events() <-chan Event { return r.out }

// InputTooLongError is the immediate rejection of a request that can never fit.
type InputTooLongError struct {
	Tokens, Limit int
}

// Error words the rejection as SGLang does.
func (e *InputTooLongError) Error() string {
	return fmt.Sprintf("Input length (%d tokens) exceeds the maximum allowed length (%d tokens). Use a shorter input or enable --allow-auto-truncate.", e.Tokens, e.Limit)
}
