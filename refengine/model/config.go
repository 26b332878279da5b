// Package model is the reference engine's transformer: a decoder-only model (RMSNorm, rotary
// positions, grouped-query attention, SwiGLU MLP) over a byte-level vocabulary, with weights
// generated deterministically from a seed. It provides the model configuration, the tokenizer,
// full and per-rank (tensor-parallel, Megatron-style) weights, the float32 compute kernels used by
// the engine, and an unsharded float64 forward pass used as the numerical reference.
package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Config is the shape of a model, read from a JSON file under fixtures/models/.
type Config struct {
	Name          string   `json:"name"`
	Architectures []string `json:"architectures,omitempty"`
	Hidden        int      `json:"hidden_size"`
	Layers        int      `json:"num_hidden_layers"`
	Heads         int      `json:"num_attention_heads"`
	KVHeads       int      `json:"num_key_value_heads"`
	FFN           int      `json:"intermediate_size"`
	Vocab         int      `json:"vocab_size"`
	MaxPositions  int      `json:"max_position_embeddings"`
	RopeTheta     float64  `json:"rope_theta"`
	NormEps       float64  `json:"rms_norm_eps"`
	Seed          uint64   `json:"seed"`
	// ResidualScale scales the output projections of attention and MLP, so that each layer adds a
	// modest update to the residual stream (keeps deep random models well conditioned).
	ResidualScale float64 `json:"residual_scale"`
	// ResidualDecay multiplies the residual scale from one layer to the next (layer l uses
	// ResidualScale·ResidualDecay^l; 0 means 1): early layers shape the output, later layers refine
	// it, which is what lets a shallow draft model agree with the target most of the time.
	ResidualDecay float64 `json:"residual_decay,omitempty"`
	// LogitScale is the standard deviation of the logits for a unit-RMS final hidden state.
	LogitScale float64 `json:"logit_scale"`
	// DraftLayers is the number of layers of the derived speculative-decoding draft model.
	DraftLayers int    `json:"draft_num_hidden_layers"`
	TorchDType  string `json:"torch_dtype,omitempty"`
}

// HeadDim is the per-head dimension.
func (c Config) HeadDim() int { return c.Hidden / c.Heads }

// Params is the number of parameters of the (target) model.
func (c Config) Params() int64 {
	hd := c.HeadDim()
	perLayer := int64(c.Hidden)*int64((c.Heads+2*c.KVHeads)*hd) + // qkv
		int64(c.Heads*hd)*int64(c.Hidden) + // o
		3*int64(c.Hidden)*int64(c.FFN) + // gate, up, down
		2*int64(c.Hidden) // norms
	return int64(c.Layers)*perLayer + 2*int64(c.Vocab)*int64(c.Hidden) + int64(c.Hidden)
}

// LoadConfig reads and validates a model configuration file.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("model config: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig decodes and validates a model configuration; name is used in error messages.
func ParseConfig(name string, data []byte) (Config, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := 1 + strings.Count(string(data[:min(int(se.Offset), len(data))]), "\n")
			return Config{}, fmt.Errorf("model config %s:%d: %w", name, line, err)
		}
		return Config{}, fmt.Errorf("model config %s: %w", name, err)
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("model config %s: %w", name, err)
	}
	return c, nil
}

func (c *Config) applyDefaults() {
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.NormEps == 0 {
		c.NormEps = 1e-5
	}
	if c.ResidualScale == 0 {
		c.ResidualScale = 0.5
	}
	if c.ResidualDecay == 0 {
		c.ResidualDecay = 1
	}
	if c.LogitScale == 0 {
		c.LogitScale = 4
	}
	if c.DraftLayers == 0 {
		c.DraftLayers = 1
	}
	if c.Name == "" {
		c.Name = "refengine-model"
	}
}

// Validate checks that the shape is usable.
func (c Config) Validate() error {
	pos := func(field string, v int) error {
		if v <= 0 {
			return fmt.Errorf("field %q: must be a positive integer, got %d", field, v)
		}
		return nil
	}
	for _, f := range []struct {
		n string
		v int
	}{{"hidden_size", c.Hidden}, {"num_hidden_layers", c.Layers}, {"num_attention_heads", c.Heads},
		{"num_key_value_heads", c.KVHeads}, {"intermediate_size", c.FFN}, {"vocab_size", c.Vocab},
		{"max_position_embeddings", c.MaxPositions}} {
		if err := pos(f.n, f.v); err != nil {
			return err
		}
	}
	if c.Hidden%c.Heads != 0 {
		return fmt.Errorf("field \"hidden_size\": %d is not a multiple of num_attention_heads %d", c.Hidden, c.Heads)
	}
	if c.HeadDim()%2 != 0 {
		return fmt.Errorf("head dimension %d must be even (rotary embedding)", c.HeadDim())
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("field \"num_attention_heads\": %d is not a multiple of num_key_value_heads %d", c.Heads, c.KVHeads)
	}
	if c.Vocab < NumSpecial+256 {
		return fmt.Errorf("field \"vocab_size\": must be at least %d (256 bytes + BOS + EOS), got %d", 256+NumSpecial, c.Vocab)
	}
	if c.DraftLayers < 0 || c.DraftLayers > c.Layers {
		return fmt.Errorf("field \"draft_num_hidden_layers\": must be in [1, %d], got %d", c.Layers, c.DraftLayers)
	}
	return nil
}

// CheckTP reports whether the model can be split over tp ranks.
func (c Config) CheckTP(tp int) error {
	switch tp {
	case 1, 2, 4, 8:
	default:
		return fmt.Errorf("tp size %d is not supported (expected 1, 2, 4 or 8)", tp)
	}
	if c.Heads%tp != 0 {
		return fmt.Errorf("num_attention_heads %d is not divisible by tp size %d", c.Heads, tp)
	}
	if c.FFN%tp != 0 {
		return fmt.Errorf("intermediate_size %d is not divisible by tp size %d", c.FFN, tp)
	}
	if c.KVHeads%tp != 0 && tp%c.KVHeads != 0 {
		return fmt.Errorf("num_key_value_heads %d and tp size %d: one must divide the other", c.KVHeads, tp)
	}
	return nil
}
