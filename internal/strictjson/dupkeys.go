package strictjson

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// DuplicateKey finds the first key that appears twice in one object of data, which must be
// valid JSON (the caller has parsed it; the scan does not check syntax). encoding/json keeps the
// last of two equal keys without a word, so that a document with `,"configs":[]` appended reads
// as one without configs; it also matches a key to a struct field ignoring case, so "Configs"
// after "configs" overrides it too. Keys are therefore compared ignoring case, except inside
// the objects that hold free-form keys (a map: a testbed's properties, metric names): freeForm
// says, for the key (field name) of an object's value, whether that object and everything in it
// is such a map, where keys are compared exactly. freeForm may be nil (every object holds field
// names).
//
// The problem names the key's JSON path, its line and column; ok is false when no key repeats.
func DuplicateKey(data []byte, freeForm func(field string) bool) (p Problem, ok bool) {
	type frame struct {
		object bool
		free   bool
		keys   map[string]bool
		key    string // the current key (object) ...
		index  int    // ... or the current index (array)
	}
	var stack []*frame
	path := func() string {
		var b strings.Builder
		for i, f := range stack {
			if f.object {
				if i > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				fmt.Fprintf(&b, "[%d]", f.index)
			}
		}
		return b.String()
	}
	// expectKey is true right after '{' or after ',' inside an object.
	expectKey := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch c {
		case '{', '[':
			f := &frame{object: c == '{'}
			if n := len(stack); n > 0 {
				parent := stack[n-1]
				f.free = parent.free || parent.object && freeForm != nil && freeForm(parent.key)
			}
			if f.object {
				f.keys = map[string]bool{}
			}
			stack = append(stack, f)
			expectKey = f.object
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			expectKey = false
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1].object {
					expectKey = true
				} else {
					stack[n-1].index++
				}
			}
		case '"':
			end := stringEnd(data, i)
			if expectKey && len(stack) > 0 {
				f := stack[len(stack)-1]
				raw := data[i : end+1]
				key := string(raw[1 : len(raw)-1])
				if strings.IndexByte(key, '\\') >= 0 {
					var s string
					if json.Unmarshal(raw, &s) == nil {
						key = s
					}
				}
				cmp := key
				if !f.free {
					cmp = strings.ToLower(key)
				}
				f.key = key
				if f.keys[cmp] {
					line, col := LineCol(data, i)
					how := ""
					if !f.free {
						how = " (keys are matched to fields ignoring case)"
					}
					return Problem{Path: path(), Line: line, Column: col, Msg: fmt.Sprintf("duplicate key %s: it appears twice in one object%s, and a reader would keep only the last", strconv.Quote(safeExcerpt(key)), how)}, true
				}
				f.keys[cmp] = true
				expectKey = false
			}
			i = end
		}
	}
	return Problem{}, false
}

// stringEnd is the index of the quote that closes the string opening at data[start].
func stringEnd(data []byte, start int) int {
	for j := start + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return len(data) - 1
}

// safeExcerpt bounds a key quoted in a message (a key may be megabytes long).
func safeExcerpt(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes in all)", s[:cut], len(s))
}
