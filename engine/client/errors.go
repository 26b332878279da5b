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
