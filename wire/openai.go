// Package wire holds the request and response types that cross the HTTP boundary between reckon
// and a serving engine: the OpenAI-compatible completions API (as SGLang and vLLM serve it) and the
// SGLang server-info endpoint. It is the only package the reference engine and the harness share.
package wire

import "encoding/json"

// CompletionRequest is the body of POST /v1/completions.
//
// Prompt is either a string, a list of token ids ([]int) or, for batch requests, a list of strings;
// it is kept raw so that each side can decode it as it needs (see DecodePrompt).
type CompletionRequest struct {
	Model            string          `json:"model,omitempty"`
	Prompt           json.RawMessage `json:"prompt"`
	MaxTokens        *int            `json:"max_tokens,omitempty"`
	Temperature      *float64        `json:"temperature,omitempty"`
	TopP             *float64        `json:"top_p,omitempty"`
	Seed             *int64          `json:"seed,omitempty"`
	Logprobs         *int            `json:"logprobs,omitempty"`
	Echo             bool            `json:"echo,omitempty"`
	Stop             json.RawMessage `json:"stop,omitempty"`
	Stream           bool            `json:"stream,omitempty"`
	StreamOptions    *StreamOptions  `json:"stream_options,omitempty"`
	IgnoreEOS        bool            `json:"ignore_eos,omitempty"`
	MinTokens        *int            `json:"min_tokens,omitempty"`
	ReturnTokenIDs   bool            `json:"return_token_ids,omitempty"`
	PromptLogprobs   *int            `json:"prompt_logprobs,omitempty"`
	SkipSpecialToken *bool           `json:"skip_special_tokens,omitempty"`
	// ReturnTokensAsTokenIDs asks vLLM to name logprob tokens "token_id:<id>" (so that top-k
	// alternatives carry their ids); servers that do not know it ignore it.
	ReturnTokensAsTokenIDs bool `json:"return_tokens_as_token_ids,omitempty"`
}

// StreamOptions asks a streaming server for a final usage chunk.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// CompletionResponse is the body of a non-streaming /v1/completions answer, and (with Object
// "text_completion" and partial Choices) each SSE chunk of a streaming one.
type CompletionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// CompletionChoice is one generated sequence (or, when streaming, one delta of it).
type CompletionChoice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *Logprobs `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
	// TokenIDs carries the generated token ids when the request set return_token_ids
	// (vLLM) or always on the reference engine; engines that do not send it leave it empty.
	TokenIDs []int `json:"token_ids,omitempty"`
	// PromptTokenIDs carries the prompt's token ids when the server reports them.
	PromptTokenIDs []int `json:"prompt_token_ids,omitempty"`
}

// Logprobs is the legacy OpenAI completions logprobs object. With echo, the prompt tokens come
// first; the first prompt token's logprob is null.
type Logprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// Usage counts tokens of one request.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ErrorResponse is the OpenAI-style error body returned with a 4xx or 5xx status.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody describes what was wrong with a request.
type ErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param,omitempty"`
	Code    int     `json:"code,omitempty"`
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string      `json:"object"`
	Data   []ModelCard `json:"data"`
}

// ModelCard names one served model.
type ModelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	OwnedBy string `json:"owned_by,omitempty"`
	MaxLen  int    `json:"max_model_len,omitempty"`
}
