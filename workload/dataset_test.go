package workload

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/internal/atomicfile"
)

func writeTemp(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadPromptsFormats(t *testing.T) {
	jsonl := writeTemp(t, "d.jsonl", `# comment
{"prompt": "hello world", "output_len": 5}

{"prompt": [1, 2, 3]}
{"prompt_token_ids": [4, 5], "id": "ids"}
{"text": "sglang style", "max_tokens": 9}
`)
	ps, err := LoadPrompts(jsonl)
	if err != nil {
		t.Fatalf("jsonl: %v", err)
	}
	if len(ps) != 4 || ps[0].Text != "hello world" || ps[0].OutputLen != 5 || ps[1].InputLen != 3 || ps[2].ID != "ids" || ps[3].OutputLen != 9 {
		t.Errorf("jsonl prompts = %+v", ps)
	}
	share := writeTemp(t, "sharegpt.json", `[
 {"id": "a", "conversations": [{"from": "human", "value": "What is Go?"}, {"from": "gpt", "value": "`+strings.Repeat("x", 40)+`"}]},
 {"id": "b", "conversations": [{"from": "gpt", "value": "no human turn"}]},
 {"id": "c", "conversations": [{"from": "system", "value": "be nice"}, {"from": "human", "value": "hi"}]}
]`)
	ps, err = LoadPrompts(share)
	if err != nil {
		t.Fatalf("sharegpt: %v", err)
	}
	if len(ps) != 2 || ps[0].ID != "a" || ps[0].Text != "What is Go?" || ps[0].OutputLen != 10 || ps[1].Text != "hi" {
		t.Errorf("sharegpt prompts = %+v", ps)
	}
}

func TestLoadPromptsErrorsNameFileAndLine(t *testing.T) {
	cases := map[string]string{
		"{\"prompt\": \"ok\"}\n{\"prompt\": 42}\n": ":2: field \"prompt\"",
		"{\"prompt\": \"ok\"}\n{not json\n":        ":2: expected a JSON object",
		"{\"other\": 1}\n":                         ":1: expected a \"prompt\"",
		"{\"prompt_token_ids\": [1, -2]}\n":        "must not be negative",
		"":                                         "empty file",
		"{\"prompt\": \"\"}\n":                     "empty prompt",
		"[{\"prompt\": \"a\"}, {\"conversations\": 3}]": "entry [1]",
	}
	for body, want := range cases {
		p := writeTemp(t, "bad.jsonl", body)
		_, err := LoadPrompts(p)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "bad.jsonl") {
			t.Errorf("LoadPrompts(%q) error = %v, want file name and %q", body, err, want)
		}
	}
}

func TestSyntheticPromptsDeterministic(t *testing.T) {
	a := SyntheticPrompts(20, 50, 10, 0.5, 42)
	b := SyntheticPrompts(20, 50, 10, 0.5, 42)
	c := SyntheticPrompts(20, 50, 10, 0.5, 43)
	if a[7].Text != b[7].Text || a[7].OutputLen != b[7].OutputLen {
		t.Errorf("same seed, different prompts")
	}
	if a[7].Text == c[7].Text {
		t.Errorf("different seeds, same prompts")
	}
	for _, p := range a {
		n := len(strings.Fields(p.Text))
		if n < 25 || n > 75 || p.OutputLen < 5 || p.OutputLen > 15 {
			t.Errorf("lengths out of range: %d words, %d out", n, p.OutputLen)
		}
	}
}

// TestSyntheticFixtureUpToDate keeps fixtures/datasets/synthetic.jsonl equal to what the
// generator makes (regenerate with RECKON_UPDATE_FIXTURES=1 go test ./workload -run Fixture).
func TestSyntheticFixtureUpToDate(t *testing.T) {
	var b bytes.Buffer
	for _, p := range SyntheticPrompts(32, 64, 32, 0.25, 0) {
		line, _ := json.Marshal(map[string]any{"id": p.ID, "prompt": p.Text, "output_len": p.OutputLen})
		b.Write(line)
		b.WriteByte('\n')
	}
	path := "../fixtures/datasets/synthetic.jsonl"
	if os.Getenv("RECKON_UPDATE_FIXTURES") == "1" {
		if err := atomicfile.WriteFile(path, b.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (regenerate with RECKON_UPDATE_FIXTURES=1)", err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Errorf("%s is stale: regenerate with RECKON_UPDATE_FIXTURES=1", path)
	}
	ps, err := LoadPrompts(path)
	if err != nil || len(ps) != 32 {
		t.Errorf("fixture does not load: %v", err)
	}
}
