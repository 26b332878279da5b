package workload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
)

// Prompt is one request's input: text or token ids, with optional known lengths.
type Prompt struct {
	ID       string `json:"id,omitempty"`
	Text     string `json:"prompt,omitempty"`
	TokenIDs []int  `json:"prompt_token_ids,omitempty"`
	// InputLen is the prompt length in tokens when known (len(TokenIDs), or a dataset field);
	// 0 means unknown (the server's usage then counts it).
	InputLen int `json:"input_len,omitempty"`
	// OutputLen is the number of tokens to generate for this prompt; 0 means Options.OutputLen.
	OutputLen int `json:"output_len,omitempty"`
}

// datasetLine is the JSONL record reckon accepts; alternative field names seen in other tools'
// datasets are accepted too.
type datasetLine struct {
	ID             any             `json:"id"`
	Prompt         json.RawMessage `json:"prompt"`
	Text           *string         `json:"text"`
	PromptTokenIDs []int           `json:"prompt_token_ids"`
	InputIDs       []int           `json:"input_ids"`
	InputLen       int             `json:"input_len"`
	OutputLen      int             `json:"output_len"`
	MaxTokens      int             `json:"max_tokens"`
	Conversations  []shareGPTTurn  `json:"conversations"`
	Conversation   []shareGPTTurn  `json:"conversation"`
}

type shareGPTTurn struct {
	From  string `json:"from"`
	Role  string `json:"role"`
	Value string `json:"value"`
	Text  string `json:"content"`
}

func (t shareGPTTurn) speaker() string {
	if t.From != "" {
		return strings.ToLower(t.From)
	}
	return strings.ToLower(t.Role)
}

func (t shareGPTTurn) body() string {
	if t.Value != "" {
		return t.Value
	}
	return t.Text
}

// LoadPrompts reads a prompt set or dataset:
//   - JSONL, one object per line: {"prompt": "text"} or {"prompt": [token ids]} or
//     {"prompt_token_ids": [...]}, with optional "id", "input_len", "output_len" (or "max_tokens");
//     blank lines and lines starting with '#' are skipped;
//   - ShareGPT: a JSON array (or JSONL) of {"conversations": [{"from": "human", "value": ...},
//     {"from": "gpt", "value": ...}, ...]}; the first human turn is the prompt and the following
//     answer's length sets OutputLen (estimated as one token per 4 characters, as there is no
//     tokenizer here: pass an explicit output length to override it);
//   - a JSON array of the JSONL objects.
//
// Errors name the file, the line (or array index) and what was expected.
func LoadPrompts(path string) ([]Prompt, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load prompts: %w", err)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%s: empty file, expected JSONL prompts or a ShareGPT JSON array", path)
	}
	var prompts []Prompt
	if trimmed[0] == '[' {
		var lines []json.RawMessage
		if err := json.Unmarshal(trimmed, &lines); err != nil {
			return nil, fmt.Errorf("%s: JSON array: %w", path, err)
		}
		for i, raw := range lines {
			p, skip, err := parsePromptRecord(raw)
			if err != nil {
				return nil, fmt.Errorf("%s: entry [%d]: %w", path, i, err)
			}
			if !skip {
				if p.ID == "" {
					p.ID = fmt.Sprint(i)
				}
				prompts = append(prompts, p)
			}
		}
	} else {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
		line := 0
		for sc.Scan() {
			line++
			b := bytes.TrimSpace(sc.Bytes())
			if len(b) == 0 || b[0] == '#' {
				continue
			}
			p, skip, err := parsePromptRecord(b)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, line, err)
			}
			if !skip {
				if p.ID == "" {
					p.ID = fmt.Sprint(line)
				}
				prompts = append(prompts, p)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", path, line+1, err)
		}
	}
	if len(prompts) == 0 {
		return nil, fmt.Errorf("%s: no prompts found", path)
	}
	return prompts, nil
}

func parsePromptRecord(raw []byte) (Prompt, bool, error) {
	var d datasetLine
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&d); err != nil {
		return Prompt{}, false, fmt.Errorf("expected a JSON object with \"prompt\" or \"prompt_token_ids\": %w", err)
	}
	p := Prompt{InputLen: d.InputLen, OutputLen: d.OutputLen}
	if p.OutputLen == 0 {
		p.OutputLen = d.MaxTokens
	}
	if d.ID != nil {
		p.ID = fmt.Sprint(d.ID)
	}
	if p.InputLen < 0 || p.OutputLen < 0 {
		return Prompt{}, false, fmt.Errorf("input_len/output_len must not be negative")
	}
	conv := d.Conversations
	if conv == nil {
		conv = d.Conversation
	}
	switch {
	case len(d.Prompt) > 0 && !bytes.Equal(d.Prompt, []byte("null")):
		switch d.Prompt[0] {
		case '"':
			if err := json.Unmarshal(d.Prompt, &p.Text); err != nil {
				return Prompt{}, false, fmt.Errorf("field \"prompt\": %w", err)
			}
		case '[':
			if err := json.Unmarshal(d.Prompt, &p.TokenIDs); err != nil {
				return Prompt{}, false, fmt.Errorf("field \"prompt\": expected a string or a list of token ids: %w", err)
			}
		default:
			return Prompt{}, false, fmt.Errorf("field \"prompt\": expected a string or a list of token ids, got %s", snippetOf(d.Prompt))
		}
	case d.PromptTokenIDs != nil:
		p.TokenIDs = d.PromptTokenIDs
	case d.InputIDs != nil:
		p.TokenIDs = d.InputIDs
	case d.Text != nil:
		p.Text = *d.Text
	case conv != nil:
		human := -1
		for i, t := range conv {
			if s := t.speaker(); s == "human" || s == "user" {
				human = i
				break
			}
		}
		if human < 0 || conv[human].body() == "" {
			return Prompt{}, true, nil
		}
		p.Text = conv[human].body()
		if p.OutputLen == 0 && human+1 < len(conv) {
			p.OutputLen = max(1, int(math.Ceil(float64(len(conv[human+1].body()))/4)))
		}
	default:
		return Prompt{}, false, fmt.Errorf("expected a \"prompt\" (string or token ids), \"prompt_token_ids\" or ShareGPT \"conversations\" field")
	}
	for i, id := range p.TokenIDs {
		if id < 0 {
			return Prompt{}, false, fmt.Errorf("prompt token id [%d] = %d: token ids must not be negative", i, id)
		}
	}
	if p.Text == "" && len(p.TokenIDs) == 0 {
		return Prompt{}, false, fmt.Errorf("empty prompt")
	}
	if len(p.TokenIDs) > 0 {
		p.InputLen = len(p.TokenIDs)
	}
	return p, false, nil
}

func snippetOf(b []byte) string {
	s := string(b)
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

// syntheticWords are the words synthetic prompts are made of: common short English words, which
// BPE tokenizers (and the reference engine's) encode as about one token each with a leading space.
var syntheticWords = strings.Fields(`the of and to in is was for on that with as by at from his
an be this are or had not but what all were when we there can one which their said if do will each
about how up out them then she many some so these would other into has more her two like him see
time could no make than first been its who now people my made over did down only way find use may
water long little very after words called just where most know get through back much before go
good new write our used me man too any day same right look think also around another came come
work three word must because does part even place well such here take why things help put years
different away again off went old number great tell men say small every found still between name
should home big give air line set own under read last never us left end along while might next
sound below saw something thought both few those always looked show large often together asked
house world going want school important until form food keep children feet land side without boy
once animals life enough took sometimes four head above kind began almost live page got earth
need far hand high year mother light parts country father let night following picture being study
second eyes soon times story boys since white days ever paper hard near sentence better best across
during today others however sure means knew try told young miles sun ways thing whole hear example
heard several change answer room sea against top turned learn point city play toward five using
himself usually money seen car morning body upon family later move face door cut done group true
half red fish plants living wanted black eat short river open`)

// SyntheticPrompts makes n text prompts of inputLen words each (lengths drawn uniformly from
// [inputLen·(1−rangeRatio), inputLen·(1+rangeRatio)] as vLLM's random dataset does), with output
// lengths drawn the same way around outputLen. The same seed gives the same prompts.
func SyntheticPrompts(n, inputLen, outputLen int, rangeRatio float64, seed int64) []Prompt {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	out := make([]Prompt, n)
	for i := range out {
		in := sampleLen(rng, inputLen, rangeRatio)
		var b strings.Builder
		for w := 0; w < in; w++ {
			if w > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(syntheticWords[rng.IntN(len(syntheticWords))])
		}
		out[i] = Prompt{ID: fmt.Sprintf("synthetic-%d", i), Text: b.String(), OutputLen: sampleLen(rng, outputLen, rangeRatio)}
	}
	return out
}

func sampleLen(rng *rand.Rand, l int, ratio float64) int {
	if l <= 0 {
		return 0
	}
	if ratio <= 0 {
		return l
	}
	lo := max(1, int(math.Floor(float64(l)*(1-ratio))))
	hi := max(lo, int(math.Ceil(float64(l)*(1+ratio))))
	return lo + rng.IntN(hi-lo+1)
}

// Token ids of synthetic token-id prompts are drawn from [SyntheticTokenLo, SyntheticTokenHi):
// printable ASCII, which is a valid, non-special id range of every tokenizer with at least 128
// ids (byte-level BPE, SentencePiece with byte fallback, and the reference engine's byte
// tokenizer), so a synthetic prompt never needs the server's vocabulary size.
const (
	SyntheticTokenLo = 32
	SyntheticTokenHi = 127
)

// SyntheticTokenPrompts makes n prompts of token ids, as vLLM's random dataset does: a shared
// prefix of prefixLen ids (the same for every prompt), then inputLen ids drawn with the seed,
// inputLen and outputLen spread uniformly over [L(1−rangeRatio), L(1+rangeRatio)]. Sent as the
// completions prompt (a list of ints), the server sees exactly prefixLen + the drawn length
// tokens. The same seed gives the same prompts.
func SyntheticTokenPrompts(n, inputLen, outputLen, prefixLen int, rangeRatio float64, seed int64) []Prompt {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	prefix := make([]int, prefixLen)
	for i := range prefix {
		prefix[i] = SyntheticTokenLo + rng.IntN(SyntheticTokenHi-SyntheticTokenLo)
	}
	out := make([]Prompt, n)
	for i := range out {
		in := sampleLen(rng, inputLen, rangeRatio)
		ids := make([]int, 0, prefixLen+in)
		ids = append(ids, prefix...)
		for k := 0; k < in; k++ {
			ids = append(ids, SyntheticTokenLo+rng.IntN(SyntheticTokenHi-SyntheticTokenLo))
		}
		out[i] = Prompt{ID: fmt.Sprintf("synthetic-%d", i), TokenIDs: ids, InputLen: len(ids), OutputLen: sampleLen(rng, outputLen, rangeRatio)}
	}
	return out
}

// syntheticText is count seeded words of syntheticWords joined by spaces.
func syntheticText(rng *rand.Rand, count int) string {
	var b strings.Builder
	for w := 0; w < count; w++ {
		if w > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(syntheticWords[rng.IntN(len(syntheticWords))])
	}
	return b.String()
}

// TextCalibration is how many tokens a server's tokenizer makes of synthetic text: tokens ≈
// Base + PerWord·words, measured from the server's own usage counts (prompt_tokens) of two
// probe prompts. It is used when the server refuses token-id prompts.
type TextCalibration struct {
	PerWord float64 `json:"tokens_per_word"`
	Base    float64 `json:"base_tokens"`
}

// words returns the number of words whose text the server counts as about tokens tokens (at
// least 1).
func (c TextCalibration) words(tokens int) int {
	if tokens <= 0 {
		return 0
	}
	per := c.PerWord
	if !(per > 0) {
		per = 1
	}
	return max(1, int(math.Round((float64(tokens)-c.Base)/per)))
}

// SyntheticCalibratedPrompts makes n text prompts whose token lengths, by cal, are about
// prefixLen + inputLen (spread by rangeRatio as SyntheticTokenPrompts does): the fallback for a
// server that refuses token ids. InputLen is left 0: the server's usage gives the real length.
func SyntheticCalibratedPrompts(n, inputLen, outputLen, prefixLen int, rangeRatio float64, seed int64, cal TextCalibration) []Prompt {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	prefix := ""
	if prefixLen > 0 {
		prefix = syntheticText(rng, max(1, int(math.Round(float64(prefixLen)/max(cal.PerWord, 1e-9))))) + " "
	}
	out := make([]Prompt, n)
	for i := range out {
		in := sampleLen(rng, inputLen, rangeRatio)
		out[i] = Prompt{ID: fmt.Sprintf("synthetic-%d", i), Text: prefix + syntheticText(rng, cal.words(in)), OutputLen: sampleLen(rng, outputLen, rangeRatio)}
	}
	return out
}
