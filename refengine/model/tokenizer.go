package model

import (
	"fmt"
	"strconv"
)

// Byte-level tokenizer: ids 0..255 are the bytes themselves; BOS and EOS follow.
const (
	BOS        = 256
	EOS        = 257
	NumSpecial = 2
)

// Encode turns text into token ids (one per byte), without BOS.
func Encode(text string) []int {
	ids := make([]int, len(text))
	for i := 0; i < len(text); i++ {
		ids[i] = int(text[i])
	}
	return ids
}

// Decode turns token ids back into text; special tokens are dropped.
func Decode(ids []int) string {
	b := make([]byte, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && id < 256 {
			b = append(b, byte(id))
		}
	}
	return string(b)
}

// TokenText is the text of a single token: its byte, or a name for special tokens.
func TokenText(id int) string {
	switch {
	case id >= 0 && id < 128:
		return string([]byte{byte(id)})
	case id >= 128 && id < 256:
		// not valid UTF-8 on its own: byte-fallback name, unique per token
		return fmt.Sprintf("<0x%02X>", id)
	case id == BOS:
		return "<s>"
	case id == EOS:
		return "</s>"
	default:
		return "<tok" + strconv.Itoa(id) + ">"
	}
}

// TokenBytes is the number of bytes a token contributes to decoded text.
func TokenBytes(id int) int {
	if id >= 0 && id < 256 {
		return 1
	}
	return 0
}
