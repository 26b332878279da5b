package client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/reckon-ci/reckon/wire"
)

// ErrMalformed is matched (errors.Is) by every error that means "the server answered, but the
// answer is not what the protocol promises": bad JSON, missing fields, NaN numbers, a broken
// event stream.
var ErrMalformed = errors.New("malformed response")

// APIError is a non-2xx answer. When the body is an OpenAI-style error object its message and
// type are kept; otherwise Body holds the start of the raw body.
type APIError struct {
	Endpoint   string // e.g. "POST /v1/completions"
	StatusCode int
	Message    string // error.message when the body was an OpenAI error object
	Type       string // error.type
	Body       string // the first bytes of the body when it was not an OpenAI error object
}

func (e *APIError) Error() string {
	if e.Message != "" {
		if e.Type != "" {
			return fmt.Sprintf("%s: HTTP %d: %s (%s)", e.Endpoint, e.StatusCode, e.Message, e.Type)
		}
		return fmt.Sprintf("%s: HTTP %d: %s", e.Endpoint, e.StatusCode, e.Message)
	}
	if e.Body != "" {
		return fmt.Sprintf("%s: HTTP %d: %s", e.Endpoint, e.StatusCode, e.Body)
	}
	return fmt.Sprintf("%s: HTTP %d", e.Endpoint, e.StatusCode)
}

// MalformedError says what was wrong with a response the server did send.
type MalformedError struct {
	Endpoint string // e.g. "POST /v1/completions"
	Field    string // the JSON field at fault, when one is known (e.g. "choices[0].logprobs")
	Reason   string // what was expected
	Snippet  string // the start of the offending body or event
	Err      error  // the decoder's error, if any
}

func (e *MalformedError) Error() string {
	var b strings.Builder
	b.WriteString(e.Endpoint)
	b.WriteString(": malformed response")
	if e.Field != "" {
		b.WriteString(": field ")
		b.WriteString(e.Field)
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Snippet != "" {
		fmt.Fprintf(&b, " (body starts %q)", e.Snippet)
	}
	return b.String()
}

// Unwrap returns the decoder's error.
func (e *MalformedError) Unwrap() error { return e.Err }

// ErrLimit is matched (errors.Is) by every *LimitError.
var ErrLimit = errors.New("server exceeded a client limit")

// LimitError says that the server sent more than the client accepts: a body or an event larger
// than its cap, or a stream that went on past max_tokens. It counts as a server error
// (errors.Is(err, ErrMalformed) is true as well).
type LimitError struct {
	Endpoint string // e.g. "POST /v1/completions (stream)"
	What     string // e.g. "server-sent event", "response body", "generated tokens"
	Limit    int64
	Unit     string // "bytes", "tokens", "events"
	Option   string // the option or flag that sets the limit
	Detail   string // e.g. "max_tokens 32 + margin 16"
}

func (e *LimitError) Error() string {
	lim := fmt.Sprintf("%d %s", e.Limit, e.Unit)
	if e.Unit == "bytes" {
		lim = fmt.Sprintf("%s (%d bytes)", humanBytes(e.Limit), e.Limit)
	}
	s := fmt.Sprintf("%s: %s exceeds the limit of %s", e.Endpoint, e.What, lim)
	if e.Detail != "" {
		s += " = " + e.Detail
	}
	if e.Option != "" {
		s += "; set by " + e.Option
	}
	return s
}

// Is makes errors.Is(err, ErrLimit) and errors.Is(err, ErrMalformed) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit || target == ErrMalformed }

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// Is makes errors.Is(err, ErrMalformed) true.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

const snippetLen = 200

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > snippetLen {
		s = s[:snippetLen] + "..."
	}
	return s
}

// apiError builds the error for a non-2xx answer.
func apiError(endpoint string, status int, body []byte) *APIError {
	e := &APIError{Endpoint: endpoint, StatusCode: status}
	var er wire.ErrorResponse
	if err := jsonUnmarshal(body, &er); err == nil && er.Error.Message != "" {
		e.Message = er.Error.Message
		e.Type = er.Error.Type
		return e
	}
	// FastAPI-style {"detail": "..."} or {"message": "..."} bodies.
	var alt struct {
		Detail  any    `json:"detail"`
		Message string `json:"message"`
		Object  string `json:"object"`
	}
	if err := jsonUnmarshal(body, &alt); err == nil {
		switch {
		case alt.Message != "":
			e.Message = alt.Message
			return e
		case alt.Detail != nil:
			e.Message = fmt.Sprint(alt.Detail)
			return e
		}
	}
	e.Body = snippet(body)
	return e
}
