package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func tiny(t *testing.T) Config {
	t.Helper()
	c, err := LoadConfig(filepath.Join("..", "..", "fixtures", "models", "tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigErrors(t *testing.T) {
	good := `{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "intermediate_size": 128, "vocab_size": 258, "max_position_embeddings": 256}`
	if _, err := ParseConfig("good.json", []byte(good)); err != nil {
		t.Fatalf("good config: %v", err)
	}
	cases := map[string]string{
		"syntax error on line 2": "{\"hidden_size\": 64,\n \"num_hidden_layers\": }",
		"unknown field":          `{"hidden_size": 64, "bogus": 1}`,
		"num_attention_heads":    strings.Replace(good, `"num_attention_heads": 4`, `"num_attention_heads": 5`, 1),
		"vocab_size":             strings.Replace(good, `"vocab_size": 258`, `"vocab_size": 100`, 1),
		"intermediate_size":      strings.Replace(good, `"intermediate_size": 128`, `"intermediate_size": 0`, 1),
	}
	for want, data := range cases {
		_, err := ParseConfig("m.json", []byte(data))
		if err == nil || !strings.Contains(err.Error(), "m.json") {
			t.Errorf("%s: got %v, want an error naming the file", want, err)
			continue
		}
		key := want
		if strings.HasPrefix(want, "syntax") {
			key = "m.json:2"
		}
		if want == "unknown field" {
			key = "bogus"
		}
		if !strings.Contains(err.Error(), key) {
			t.Errorf("%s: error %q does not mention %q", want, err, key)
		}
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.json")); err == nil || !os.IsNotExist(errUnwrapAll(err)) {
		t.Errorf("missing file: %v", err)
	}
	c := tiny(t)
	for _, tp := range []int{1, 2, 4, 8} {
		if err := c.CheckTP(tp); err != nil {
			t.Errorf("tp %d: %v", tp, err)
		}
	}
	if err := c.CheckTP(3); err == nil {
		t.Error("tp 3 accepted")
	}
}

func errUnwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

func TestTokenizerRoundTrip(t *testing.T) {
	s := "héllo, wörld\n\x00\xff"
	if got := Decode(Encode(s)); got != s {
		t.Errorf("round trip %q -> %q", s, got)
	}
	if Decode([]int{BOS, 'a', EOS}) != "a" || TokenText(EOS) != "</s>" || TokenText(0xC3) != "<0xC3>" || TokenText('a') != "a" {
		t.Error("special or byte-fallback token text")
	}
}

func TestWeightsDeterministic(t *testing.T) {
	c := tiny(t)
	a, b := Generate(c), Generate(c)
	if a.Layers[3].Wd[77] != b.Layers[3].Wd[77] || a.LMHead[1234] != b.LMHead[1234] {
		t.Error("weights differ between two generations from the same seed")
	}
	c2 := c
	c2.Seed++
	if Generate(c2).Layers[0].Wq[5] == a.Layers[0].Wq[5] {
		t.Error("a different seed gave the same weights")
	}
	d := a.Draft()
	if len(d.Layers) != c.DraftLayers || &d.Embed[0] != &a.Embed[0] || d.Layers[0].Wq[0] != RoundBF16(a.Layers[0].Wq[0]) {
		t.Error("draft: wrong layers, or not sharing embeddings, or not bf16-rounded")
	}
	if got := c.Params(); got < 500_000 || got > 2_000_000 {
		t.Errorf("tiny model has %d parameters", got)
	}
}

// TestShardsPartitionTheModel: the ranks' shards hold every query head, MLP column and vocabulary
// id exactly once.
func TestShardsPartitionTheModel(t *testing.T) {
	c := tiny(t)
	w := Generate(c)
	for _, tp := range []int{1, 2, 4, 8} {
		var qh, ffn, vocab int
		for r := 0; r < tp; r++ {
			s := ShardFor(w, r, tp)
			qh += s.QHeads
			ffn += s.FFN
			vocab += s.VocabHi - s.VocabLo
			if s.KVHeads < 1 || len(s.KVOfQ) != s.QHeads {
				t.Errorf("tp %d rank %d: %d KV heads", tp, r, s.KVHeads)
			}
		}
		if qh != c.Heads || ffn != c.FFN || vocab != c.Vocab {
			t.Errorf("tp %d: heads %d ffn %d vocab %d", tp, qh, ffn, vocab)
		}
	}
}
