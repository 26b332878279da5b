package client

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/reckon-ci/reckon/wire"
)

// fastChunk is a streamed completion chunk decoded without reflection. The fast path covers the
// common shape of completion chunks (choices with index, text, token_ids, finish_reason and a null
// logprobs; an optional usage object); anything else (logprobs, errors, odd syntax) makes it give
// up, and the chunk is decoded by encoding/json instead, which also reports malformed input.
type fastChunk struct {
	choices []fastChoice
	usage   *wire.Usage
}

type fastChoice struct {
	index        int
	text         string
	tokenIDs     []int
	finishReason string
	hasFinish    bool
}

type fastParser struct {
	b   []byte
	i   int
	ids []int // scratch for token ids, reused between chunks
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) consume(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a JSON string; escapes are decoded by encoding/json.
func (p *fastParser) str() (string, bool) {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", false
	}
	start := p.i
	p.i++
	escaped, nonASCII := false, false
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c >= 0x80:
			nonASCII = true
		case c == '\\':
			escaped = true
			p.i += 2
			continue
		case c == '"':
			p.i++
			// Invalid UTF-8 is decoded by encoding/json too (it substitutes U+FFFD).
			if nonASCII && !utf8.Valid(p.b[start+1:p.i-1]) {
				escaped = true
			}
			if !escaped {
				return string(p.b[start+1 : p.i-1]), true
			}
			var s string
			if json.Unmarshal(p.b[start:p.i], &s) != nil {
				return "", false
			}
			return s, true
		case c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// key reads an object key without allocating (escaped keys make the fast path give up).
func (p *fastParser) key() ([]byte, bool) {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		if p.b[j] < 0x20 {
			return nil, false
		}
		switch p.b[j] {
		case '\\':
			return nil, false
		case '"':
			p.i = j + 1
			if !p.consume(':') {
				return nil, false
			}
			return p.b[start:j], true
		}
	}
	return nil, false
}

func (p *fastParser) integer() (int, bool) {
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == start || (p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E')) || !validNumber(p.b[start:p.i]) {
		return 0, false
	}
	n, err := strconv.Atoi(string(p.b[start:p.i]))
	return n, err == nil
}

func (p *fastParser) literal(lit string) bool {
	p.ws()
	if len(p.b)-p.i >= len(lit) && string(p.b[p.i:p.i+len(lit)]) == lit {
		p.i += len(lit)
		return true
	}
	return false
}

// skip passes over any JSON value, checking its syntax (nested arrays and objects included).
func (p *fastParser) skip() bool { return p.skipDepth(0) }

func (p *fastParser) skipDepth(depth int) bool {
	if depth > 64 {
		return false
	}
	p.ws()
	if p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '{':
		return p.object(func([]byte) bool { return p.skipDepth(depth + 1) })
	case c == '[':
		p.i++
		if p.consume(']') {
			return true
		}
		for {
			if !p.skipDepth(depth + 1) {
				return false
			}
			if p.consume(',') {
				continue
			}
			return p.consume(']')
		}
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.i
		for p.i < len(p.b) {
			c := p.b[p.i]
			if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
				p.i++
				continue
			}
			break
		}
		return validNumber(p.b[start:p.i])
	}
	return false
}

// validNumber checks the JSON number grammar (no leading zeros, no "+", digits after "." and "e").
func validNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(b)
}

// foldsTo reports whether k matches one of the names only case-insensitively: encoding/json would
// treat it as that field, so the fast path gives up rather than disagree.
func foldsTo(k []byte, names ...string) bool {
	for _, n := range names {
		if string(k) != n && strings.EqualFold(string(k), n) {
			return true
		}
	}
	return false
}

// object calls field for each key of an object; field returns false to give up.
func (p *fastParser) object(field func(k []byte) bool) bool {
	if !p.consume('{') {
		return false
	}
	if p.consume('}') {
		return true
	}
	for {
		k, ok := p.key()
		if !ok || !field(k) {
			return false
		}
		if p.consume(',') {
			continue
		}
		return p.consume('}')
	}
}

func (p *fastParser) intArray() ([]int, bool) {
	if p.literal("null") {
		return nil, true
	}
	if !p.consume('[') {
		return nil, false
	}
	start := len(p.ids)
	if p.consume(']') {
		return p.ids[start:start:start], true
	}
	for {
		n, ok := p.integer()
		if !ok {
			return nil, false
		}
		p.ids = append(p.ids, n)
		if p.consume(',') {
			continue
		}
		if !p.consume(']') {
			return nil, false
		}
		end := len(p.ids)
		return p.ids[start:end:end], true
	}
}

// parse decodes b, or returns false when the chunk needs the full decoder.
func (p *fastParser) parse(b []byte, out *fastChunk) bool {
	p.b, p.i = b, 0
	p.ids = p.ids[:0]
	out.choices = out.choices[:0]
	out.usage = nil
	if !p.object(func(k []byte) bool { return p.chunkField(k, out) }) {
		return false
	}
	p.ws()
	return p.i == len(p.b)
}

// chunkField reads the value of the chunk's top-level field k into out, or returns false when
// the field needs the full decoder (an error, a key that only folds to a known one, a value of
// an unexpected type). Fields the client does not use are skipped.
func (p *fastParser) chunkField(k []byte, out *fastChunk) bool {
	switch string(k) {
	case "choices":
		return p.choices(out)
	case "usage":
		return p.usage(out)
	case "error":
		return false
	case "id", "object", "model":
		if p.literal("null") {
			return true
		}
		_, ok := p.str()
		return ok
	case "created":
		if p.literal("null") {
			return true
		}
		_, ok := p.integer()
		return ok
	}
	if foldsTo(k, "choices", "usage", "error", "id", "object", "created", "model") {
		return false
	}
	return p.skip()
}

// choices reads the "choices" array into out.choices.
func (p *fastParser) choices(out *fastChunk) bool {
	if !p.consume('[') {
		return false
	}
	if p.consume(']') {
		return true
	}
	for {
		var ch fastChoice
		if !p.object(func(k []byte) bool { return p.choiceField(k, &ch) }) {
			return false
		}
		out.choices = append(out.choices, ch)
		if p.consume(',') {
			continue
		}
		return p.consume(']')
	}
}

// choiceField reads the value of a choice's field k into ch, or returns false when it needs the
// full decoder (logprobs or prompt data that are not null, a key that only folds to a known one).
func (p *fastParser) choiceField(k []byte, ch *fastChoice) bool {
	switch string(k) {
	case "index":
		n, ok := p.integer()
		ch.index = n
		return ok
	case "text":
		s, ok := p.str()
		ch.text = s
		return ok
	case "token_ids":
		ids, ok := p.intArray()
		ch.tokenIDs = ids
		return ok
	case "finish_reason", "stop_reason":
		if p.literal("null") {
			return true
		}
		if string(k) == "stop_reason" {
			return p.skip()
		}
		s, ok := p.str()
		ch.finishReason, ch.hasFinish = s, ok
		return ok
	case "logprobs", "prompt_token_ids", "prompt_logprobs":
		return p.literal("null")
	}
	if foldsTo(k, "index", "text", "token_ids", "finish_reason", "logprobs", "prompt_token_ids") {
		return false
	}
	return p.skip()
}

// usage reads the "usage" object (or null) into out.usage; a negative count needs the full
// decoder.
func (p *fastParser) usage(out *fastChunk) bool {
	if p.literal("null") {
		return true
	}
	u := &wire.Usage{}
	out.usage = u
	return p.object(func(k []byte) bool {
		var n int
		var ok bool
		switch string(k) {
		case "prompt_tokens":
			n, ok = p.integer()
			u.PromptTokens = n
		case "completion_tokens":
			n, ok = p.integer()
			u.CompletionTokens = n
		case "total_tokens":
			n, ok = p.integer()
			u.TotalTokens = n
		default:
			if foldsTo(k, "prompt_tokens", "completion_tokens", "total_tokens") {
				return false
			}
			return p.skip()
		}
		return ok && n >= 0
	})
}
