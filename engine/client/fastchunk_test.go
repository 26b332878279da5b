package client

import (
	"encoding/json"
	"fmt"
	"testing"
)

var chunkSamples = []string{
	`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" hello","logprobs":null,"finish_reason":null,"token_ids":[42]}]}`,
	`{"choices":[{"index":0,"text":"a\"b\\c\u00e9\ud83d\ude00\n","finish_reason":"length","stop_reason":null}]}`,
	`{"choices":[{"text":"x","token_ids":[]}],"usage":null}`,
	`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":0}}}`,
	`{ "choices" : [ { "index" : 1 , "text" : "y" , "token_ids" : [ 1 , 2 , 3 ] , "extra" : {"a":[1,{"b":"]"}]} } , {"index":0,"text":"z"} ] }`,
	`{"choices":[{"index":0,"text":"q","stop_reason":151643,"finish_reason":"stop"}],"system_fingerprint":null,"n":1.5e3,"ok":true}`,
	`{"choices":[{"index":0,"text":"x","logprobs":{"tokens":["x"],"token_logprobs":[-0.5]}}]}`, // needs the full decoder
	`{"error":{"message":"boom"}}`,
	`{"choices":[{"index":0,"text":"x","token_ids":[1.5]}]}`,
	`{"choices":[{"index":0,"text":"x"}]} trailing`,
	`{"choices":[{"index":0,"text":"x"`,
	`{"choices":[{"index":0,"text":NaN}]}`,
	`{"usage":{"prompt_tokens":-1,"completion_tokens":3}}`,
	`{"choices":[{"\u0069ndex":0,"text":"escaped key"}]}`,
}

// TestFastChunkAgreesWithEncodingJSON: whenever the fast path accepts a chunk, it must decode
// exactly what encoding/json decodes; when it declines, the full decoder takes over.
func TestFastChunkAgreesWithEncodingJSON(t *testing.T) {
	accepted := 0
	for _, s := range chunkSamples {
		checkFastChunk(t, s)
		var p fastParser
		var fc fastChunk
		if p.parse([]byte(s), &fc) {
			accepted++
		}
	}
	if accepted < 5 {
		t.Errorf("fast path accepted only %d of the common chunk shapes", accepted)
	}
}

func checkFastChunk(t *testing.T, s string) {
	t.Helper()
	var p fastParser
	var fc fastChunk
	if !p.parse([]byte(s), &fc) {
		return
	}
	var ev streamEvent
	if err := json.Unmarshal([]byte(s), &ev); err != nil {
		t.Errorf("fast path accepted %q which encoding/json rejects: %v", s, err)
		return
	}
	if len(ev.Error) > 0 {
		t.Errorf("fast path accepted an error event %q", s)
	}
	if len(ev.Choices) != len(fc.choices) {
		t.Errorf("%q: %d choices, encoding/json %d", s, len(fc.choices), len(ev.Choices))
		return
	}
	for i, ch := range ev.Choices {
		f := fc.choices[i]
		fr := ""
		if ch.FinishReason != nil {
			fr = *ch.FinishReason
		}
		if f.index != ch.Index || f.text != ch.Text || fmt.Sprint(f.tokenIDs) != fmt.Sprint(ch.TokenIDs) || f.finishReason != fr || ch.Logprobs != nil {
			t.Errorf("%q choice %d: fast %+v, encoding/json %+v", s, i, f, ch)
		}
	}
	if (ev.Usage == nil) != (fc.usage == nil) || (ev.Usage != nil && *ev.Usage != *fc.usage) {
		t.Errorf("%q: usage fast %+v, encoding/json %+v", s, fc.usage, ev.Usage)
	}
}

// FuzzFastChunk runs the same agreement check on mutated chunks (go test -fuzz FuzzFastChunk).
func FuzzFastChunk(f *testing.F) {
	for _, s := range chunkSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkFastChunk(t, s) })
}
