package core

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeBOM returns a reader of UTF-8 text for a log that may carry a byte-order mark: a UTF-8
// BOM is dropped, and UTF-16 text (what PowerShell's ">" and some Windows tools write) is
// converted. Text without a BOM is returned unchanged.
func decodeBOM(br *bufio.Reader) io.Reader {
	head, _ := br.Peek(3)
	switch {
	case bytes.HasPrefix(head, []byte{0xEF, 0xBB, 0xBF}):
		_, _ = br.Discard(3)
		return br
	case bytes.HasPrefix(head, []byte{0xFF, 0xFE}):
		_, _ = br.Discard(2)
		return &utf16Reader{r: br, order: binary.LittleEndian}
	case bytes.HasPrefix(head, []byte{0xFE, 0xFF}):
		_, _ = br.Discard(2)
		return &utf16Reader{r: br, order: binary.BigEndian}
	}
	return br
}

// utf16Reader converts a UTF-16 stream to UTF-8. An unpaired surrogate or a dangling final
// byte becomes U+FFFD.
type utf16Reader struct {
	r     io.Reader
	order binary.ByteOrder
	in    []byte // undecoded input carried over (an odd byte, a high surrogate)
	out   []byte // decoded output not yet returned
	err   error
}

func (u *utf16Reader) Read(p []byte) (int, error) {
	for len(u.out) == 0 {
		if u.err != nil {
			return 0, u.err
		}
		u.fill()
	}
	n := copy(p, u.out)
	u.out = u.out[n:]
	return n, nil
}

func (u *utf16Reader) fill() {
	buf := make([]byte, 32*1024)
	n, err := u.r.Read(buf)
	u.in = append(u.in, buf[:n]...)
	if err != nil {
		u.err = err
		if !errors.Is(err, io.EOF) {
			return
		}
	}
	var units []uint16
	for len(u.in) >= 2 {
		units = append(units, u.order.Uint16(u.in))
		u.in = u.in[2:]
	}
	// Keep a trailing high surrogate for the next read unless the input has ended.
	if k := len(units); k > 0 && utf16.IsSurrogate(rune(units[k-1])) && units[k-1] < 0xDC00 && u.err == nil {
		b := make([]byte, 2)
		u.order.PutUint16(b, units[k-1])
		u.in = append(b, u.in...)
		units = units[:k-1]
	}
	for _, r := range utf16.Decode(units) {
		u.out = utf8.AppendRune(u.out, r)
	}
	if u.err != nil && len(u.in) > 0 {
		u.out = utf8.AppendRune(u.out, utf8.RuneError)
		u.in = nil
	}
}

// ToUTF8 returns b as UTF-8 text: a UTF-8 byte-order mark is dropped and UTF-16 text with its
// byte-order mark is converted. Other input is returned unchanged.
func ToUTF8(b []byte) []byte {
	if !bytes.HasPrefix(b, []byte{0xEF, 0xBB, 0xBF}) && !bytes.HasPrefix(b, []byte{0xFF, 0xFE}) &&
		!bytes.HasPrefix(b, []byte{0xFE, 0xFF}) {
		return b
	}
	out, _ := io.ReadAll(decodeBOM(bufio.NewReader(bytes.NewReader(b))))
	return out
}
