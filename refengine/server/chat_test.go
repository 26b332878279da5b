package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/refengine/model"
)

// TestChatCompletions: /v1/chat/completions applies the plain chat template (its tokens counted
// in prompt_tokens) and streams as SGLang does: a role delta, content deltas, a last delta with
// the finish reason, a usage event with include_usage, then [DONE]; the whole answer matches the
// same prompt through /v1/completions.
func TestChatCompletions(t *testing.T) {
	ts := start(t, nil, true)
	msgs := []map[string]string{{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}}
	tmpl := "system: be brief\nuser: hello there\nassistant:"
	code, body := ts.post(t, "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 6, "temperature": 0, "ignore_eos": true,
		"stream": true, "stream_options": map[string]any{"include_usage": true}})
	if code != 200 {
		t.Fatalf("HTTP %d: %s", code, body)
	}
	var content strings.Builder
	var events []map[string]any
	lines := strings.Split(string(body), "\n\n")
	if strings.TrimSpace(lines[len(lines)-2]) != "data: [DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", body)
	}
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "data: {") {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(l[len("data: "):]), &ev); err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	first := events[0]["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
	if first["role"] != "assistant" || first["content"] != "" || events[0]["object"] != "chat.completion.chunk" {
		t.Errorf("first event %v: want the role delta", events[0])
	}
	var finish any
	for _, ev := range events[1 : len(events)-1] {
		ch := ev["choices"].([]any)[0].(map[string]any)
		content.WriteString(ch["delta"].(map[string]any)["content"].(string))
		if ch["finish_reason"] != nil {
			finish = ch["finish_reason"]
		}
	}
	usage := events[len(events)-1]["usage"].(map[string]any)
	if finish != "length" || usage["prompt_tokens"] != float64(len(model.Encode(tmpl))) || usage["completion_tokens"] != float64(6) {
		t.Errorf("finish %v, usage %v; want length, %d prompt tokens (the template), 6 completion tokens", finish, usage, len(model.Encode(tmpl)))
	}
	want := ts.complete(t, map[string]any{"prompt": tmpl, "max_tokens": 6, "temperature": 0, "ignore_eos": true})
	if content.String() != want.Choices[0].Text {
		t.Errorf("chat content %q, completions text of the templated prompt %q", content.String(), want.Choices[0].Text)
	}
	// Whole answer and bad input.
	code, body = ts.post(t, "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 6, "temperature": 0, "ignore_eos": true})
	var whole struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct{ Role, Content string } `json:"message"`
		} `json:"choices"`
	}
	if code != 200 || json.Unmarshal(body, &whole) != nil || whole.Object != "chat.completion" || whole.Choices[0].Message.Content != want.Choices[0].Text {
		t.Errorf("non-streamed: HTTP %d %s", code, body)
	}
	if code, body := ts.post(t, "/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "robot", "content": "x"}}}); code != 400 || !strings.Contains(string(body), "[0].role: expected system, user or assistant") {
		t.Errorf("bad role: HTTP %d %s", code, body)
	}
}
