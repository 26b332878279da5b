package spec

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/reckon-ci/reckon/internal/num"
	"github.com/reckon-ci/reckon/internal/textutil"
)

// decoder walks the YAML syntax tree by hand (rather than through reflection) so that every
// problem is reported with its position and the field's path, and so that decoding goes on after
// a problem: the user sees all of them at once.
type decoder struct {
	file    string
	errs    ErrorList
	anchors map[string]ast.Node
}

// position of a node: for a mapping, its first key (the token of a block mapping is the first
// colon, which is not where a reader looks).
func position(n ast.Node) (line, col int) {
	if n == nil {
		return 0, 0
	}
	if m, ok := n.(*ast.MappingNode); ok && len(m.Values) > 0 {
		return position(m.Values[0].Key)
	}
	if a, ok := n.(*ast.AnchorNode); ok && a.Value != nil {
		// "&name value": point at the anchor, where the value starts.
		t := a.GetToken()
		if t != nil && t.Position != nil {
			return t.Position.Line, t.Position.Column
		}
	}
	t := n.GetToken()
	if t == nil || t.Position == nil {
		return 0, 0
	}
	return t.Position.Line, t.Position.Column
}

// errorf records a problem with a value (CodeValue) at node n, for the field at path field.
func (d *decoder) errorf(n ast.Node, field, format string, args ...any) {
	d.errorc(CodeValue, n, field, format, args...)
}

// errorc records a problem of kind code at node n, for the field at path field.
func (d *decoder) errorc(code string, n ast.Node, field, format string, args ...any) {
	line, col := position(n)
	d.errs = append(d.errs, &Error{Code: code, File: d.file, Line: line, Column: col, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// describe names a node's YAML type (and short value) for "expected X, got Y" messages.
func describe(n ast.Node) string {
	switch v := n.(type) {
	case nil, *ast.NullNode:
		return "null"
	case *ast.StringNode:
		return fmt.Sprintf("string %q", v.Value)
	case *ast.LiteralNode:
		return "a block string"
	case *ast.IntegerNode:
		return "integer " + v.GetToken().Value
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "number " + v.GetToken().Value
	case *ast.BoolNode:
		return "boolean " + v.GetToken().Value
	case *ast.SequenceNode:
		return "a list"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	default:
		return n.Type().String()
	}
}

func isNull(n ast.Node) bool {
	if n == nil {
		return true
	}
	_, ok := n.(*ast.NullNode)
	return ok
}

// entry is one key: value pair of a mapping.
type entry struct {
	key   string
	keyN  ast.Node
	value ast.Node
}

// mapping is a YAML mapping being decoded into a struct. Every getter marks its key as known;
// done reports the keys that no getter asked for.
type mapping struct {
	d       *decoder
	path    string
	node    ast.Node // for positions of "missing field" errors
	entries []entry
	index   map[string]int
	known   []string
	what    string // "a floor check", for "does not apply to" messages; may be empty
	// allowExt accepts keys starting with "x-" (extension fields that hold YAML anchors).
	allowExt bool
}

// mapping decodes n (already resolved or not) as a mapping. A null node is an empty mapping.
// It returns nil, after reporting, when n is of another type.
func (d *decoder) mapping(n ast.Node, path string) *mapping {
	n = d.resolve(n, path)
	m := &mapping{d: d, path: path, node: n, index: map[string]int{}}
	if isNull(n) {
		return m
	}
	mn, ok := n.(*ast.MappingNode)
	if !ok {
		if mv, isMV := n.(*ast.MappingValueNode); isMV {
			mn = ast.Mapping(mv.GetToken(), false, mv)
		} else {
			d.errorc(CodeType, n, path, "expected a mapping, got %s", describe(n))
			return nil
		}
	}
	m.add(mn, false, 0)
	return m
}

// add appends a mapping's entries; merged ("<<") entries never replace explicit keys.
func (m *mapping) add(mn *ast.MappingNode, merged bool, depth int) {
	for _, mv := range mn.Values {
		if _, isMerge := mv.Key.(*ast.MergeKeyNode); isMerge || mv.Key.GetToken().Value == "<<" {
			if depth > 8 {
				m.d.errorc(CodeSyntax, mv.Key, m.path, "merge keys nested too deeply")
				continue
			}
			src := m.d.resolve(mv.Value, m.path)
			var sources []ast.Node
			if seq, ok := src.(*ast.SequenceNode); ok {
				sources = seq.Values
			} else {
				sources = []ast.Node{src}
			}
			for _, s := range sources {
				s = m.d.resolve(s, m.path)
				sm, ok := s.(*ast.MappingNode)
				if !ok {
					m.d.errorc(CodeSyntax, s, m.path, "merge key << expects a mapping or a list of mappings, got %s", describe(s))
					continue
				}
				m.add(sm, true, depth+1)
			}
			continue
		}
		key := mv.Key.GetToken().Value
		if k, ok := m.d.resolve(mv.Key, m.path).(*ast.StringNode); ok {
			key = k.Value
		}
		if i, dup := m.index[key]; dup {
			if merged {
				continue // explicit keys (and earlier merges) win
			}
			first := m.entries[i]
			if first.merged() {
				m.entries[i] = entry{key: key, keyN: mv.Key, value: mv.Value}
				continue
			}
			line, _ := position(first.keyN)
			m.d.errorc(CodeDuplicate, mv.Key, m.path, "duplicate key %q (first at line %d)", key, line)
			continue
		}
		e := entry{key: key, keyN: mv.Key, value: mv.Value}
		if merged {
			e.keyN = mergedKey{mv.Key}
		}
		m.index[key] = len(m.entries)
		m.entries = append(m.entries, e)
	}
}

// mergedKey marks an entry that came from a merge key, so that an explicit key may replace it.
type mergedKey struct{ ast.Node }

func (e entry) merged() bool { _, ok := e.keyN.(mergedKey); return ok }

func (m *mapping) field(key string) string {
	if m.path == "" {
		return key
	}
	return m.path + "." + key
}

// get returns the resolved value of key, or nil when it is absent or null.
func (m *mapping) get(key string) (ast.Node, bool) {
	m.known = append(m.known, key)
	i, ok := m.index[key]
	if !ok {
		return nil, false
	}
	v := m.d.resolve(m.entries[i].value, m.field(key))
	if isNull(v) {
		return nil, false
	}
	return v, true
}

// has reports whether key is present with a non-null value (without marking it known).
func (m *mapping) has(key string) bool {
	i, ok := m.index[key]
	return ok && !isNull(m.entries[i].value)
}

// missing reports a required field that is absent.
func (m *mapping) missing(key, expected string) {
	m.d.errorc(CodeMissingField, m.node, m.path, "missing required field %q (%s)", key, expected)
}

func (m *mapping) bad(n ast.Node, key, format string, args ...any) {
	m.d.errorf(n, m.field(key), format, args...)
}

// badc is bad with the problem's code.
func (m *mapping) badc(code string, n ast.Node, key, format string, args ...any) {
	m.d.errorc(code, n, m.field(key), format, args...)
}

// scalarText returns a scalar's text: strings as they are, numbers and booleans as written.
func scalarText(n ast.Node) (string, bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		return v.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return v.GetToken().Value, true
	}
	return "", false
}

func (m *mapping) str(key string) (string, bool) {
	v, ok := m.get(key)
	if !ok {
		return "", false
	}
	switch s := v.(type) {
	case *ast.StringNode:
		return s.Value, true
	case *ast.LiteralNode:
		return s.Value.Value, true
	}
	m.badc(CodeType, v, key, "expected a string, got %s", describe(v))
	return "", false
}

// reqStr is str for a required, non-empty field.
func (m *mapping) reqStr(key, expected string) (string, bool) {
	s, ok := m.str(key)
	if ok && s == "" {
		i := m.index[key]
		m.bad(m.entries[i].value, key, "must not be empty (%s)", expected)
		return "", false
	}
	if !ok && !m.has(key) {
		m.missing(key, expected)
	}
	return s, ok
}

// enum reads a string that must be one of allowed (compared case-insensitively when fold).
func (m *mapping) enum(key string, fold bool, allowed ...string) (string, bool) {
	s, ok := m.str(key)
	if !ok {
		return "", false
	}
	for _, a := range allowed {
		if s == a || (fold && strings.EqualFold(s, a)) {
			return a, true
		}
	}
	i := m.index[key]
	m.bad(m.entries[i].value, key, "expected one of %s; got %q", strings.Join(allowed, ", "), s)
	return "", false
}

func (m *mapping) integer(key string, min int64) (int, bool) {
	v, ok := m.get(key)
	if !ok {
		return 0, false
	}
	iv, isInt := v.(*ast.IntegerNode)
	if !isInt {
		m.badc(CodeType, v, key, "expected an integer, got %s", describe(v))
		return 0, false
	}
	var n int64
	switch x := iv.Value.(type) {
	case int64:
		n = x
	case uint64:
		if x > math.MaxInt32 {
			m.bad(v, key, "integer %d is too large", x)
			return 0, false
		}
		n = int64(x)
	}
	if n < min || n > math.MaxInt32 {
		if n < min {
			m.bad(v, key, "expected an integer >= %d, got %d", min, n)
		} else {
			m.bad(v, key, "integer %d is too large", n)
		}
		return 0, false
	}
	return int(n), true
}

func (m *mapping) intPtr(key string, min int64) *int {
	n, ok := m.integer(key, min)
	if !ok {
		return nil
	}
	return &n
}

func (m *mapping) number(key string) (float64, bool) {
	v, ok := m.get(key)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case *ast.IntegerNode:
		switch y := x.Value.(type) {
		case int64:
			return float64(y), true
		case uint64:
			return float64(y), true
		}
	case *ast.FloatNode:
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
			break
		}
		return x.Value, true
	case *ast.StringNode:
		// YAML 1.2 reads 1e-6 as a float; the parser (YAML 1.1) leaves it a string. Accept it
		// when it is written plain (a quoted "1e-6" stays a string).
		if t := x.GetToken(); t != nil && t.Type == token.StringType {
			if f, ok := num.ParseDecimal(x.Value); ok {
				return f, true
			}
		}
	}
	m.badc(CodeType, v, key, "expected a number, got %s", describe(v))
	return 0, false
}

// numberIn reads a number in [lo, hi] (inclusive), returning nil when absent or bad.
func (m *mapping) numberIn(key string, lo, hi float64, expected string) *float64 {
	f, ok := m.number(key)
	if !ok {
		return nil
	}
	if f < lo || f > hi {
		i := m.index[key]
		m.bad(m.entries[i].value, key, "expected %s, got %s", expected, num.Exact(f))
		return nil
	}
	return &f
}

func (m *mapping) boolean(key string) *bool {
	v, ok := m.get(key)
	if !ok {
		return nil
	}
	b, isBool := v.(*ast.BoolNode)
	if !isBool {
		m.badc(CodeType, v, key, "expected true or false, got %s", describe(v))
		return nil
	}
	return &b.Value
}

func (m *mapping) duration(key string) (Duration, bool) {
	v, ok := m.get(key)
	if !ok {
		return 0, false
	}
	s, isStr := v.(*ast.StringNode)
	if !isStr {
		if _, isNum := v.(*ast.IntegerNode); isNum {
			m.badc(CodeType, v, key, "expected a duration with a unit such as 30s, 2m or 1m30s, got %s", describe(v))
		} else {
			m.badc(CodeType, v, key, "expected a duration such as 30s, 2m or 1m30s, got %s", describe(v))
		}
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(s.Value))
	if err != nil {
		m.bad(v, key, "expected a duration such as 30s, 2m or 1m30s, got %q", s.Value)
		return 0, false
	}
	if d <= 0 {
		m.bad(v, key, "expected a positive duration, got %q", s.Value)
		return 0, false
	}
	return Duration(d), true
}

// list returns the items of a sequence (nil when absent or null).
func (m *mapping) list(key string) ([]ast.Node, bool) {
	v, ok := m.get(key)
	if !ok {
		return nil, false
	}
	seq, isSeq := v.(*ast.SequenceNode)
	if !isSeq {
		m.badc(CodeType, v, key, "expected a list, got %s", describe(v))
		return nil, false
	}
	return seq.Values, true
}

// strList reads a list of strings. With scalars, numbers and booleans are taken as written
// (command-line arguments such as "--tp 4" are often written unquoted); otherwise only strings.
func (m *mapping) strList(key string, scalars bool) []string {
	v, ok := m.get(key)
	if !ok {
		return nil
	}
	seq, isSeq := v.(*ast.SequenceNode)
	if !isSeq {
		m.badc(CodeType, v, key, "expected a list of strings, got %s", describe(v))
		return nil
	}
	out := make([]string, 0, len(seq.Values))
	for i, it := range seq.Values {
		f := fmt.Sprintf("%s[%d]", m.field(key), i)
		it = m.d.resolve(it, f)
		var s string
		var good bool
		if scalars {
			s, good = scalarText(it)
		} else {
			switch x := it.(type) {
			case *ast.StringNode:
				s, good = x.Value, true
			case *ast.LiteralNode:
				s, good = x.Value.Value, true
			}
		}
		if !good {
			m.d.errorc(CodeType, it, f, "expected a string, got %s", describe(it))
			continue
		}
		out = append(out, s)
	}
	return out
}

// strMap reads a mapping of names to strings (environment variables); scalar values are taken
// as written.
func (m *mapping) strMap(key string) map[string]string {
	v, ok := m.get(key)
	if !ok {
		return nil
	}
	sub := m.d.mapping(v, m.field(key))
	if sub == nil {
		return nil
	}
	out := make(map[string]string, len(sub.entries))
	for _, e := range sub.entries {
		f := sub.field(e.key)
		val := m.d.resolve(e.value, f)
		if isNull(val) {
			out[e.key] = ""
			continue
		}
		s, good := scalarText(val)
		if !good {
			m.d.errorc(CodeType, val, f, "expected a string, got %s", describe(val))
			continue
		}
		out[e.key] = s
	}
	return out
}

// sub decodes key as a nested mapping (nil when absent or of the wrong type).
func (m *mapping) sub(key string) *mapping {
	v, ok := m.get(key)
	if !ok {
		return nil
	}
	return m.d.mapping(v, m.field(key))
}

// done reports every key that no getter asked for.
func (m *mapping) done() {
	if m == nil {
		return
	}
	known := map[string]bool{}
	var list []string
	for _, k := range m.known {
		if !known[k] {
			known[k] = true
			list = append(list, k)
		}
	}
	sort.Strings(list)
	for _, e := range m.entries {
		if known[e.key] || (m.allowExt && strings.HasPrefix(e.key, "x-")) {
			continue
		}
		kn := e.keyN
		if mk, ok := kn.(mergedKey); ok {
			kn = mk.Node
		}
		where := ""
		if m.what != "" {
			where = " for " + m.what
		}
		if s := closest(e.key, list); s != "" {
			m.d.errorc(CodeUnknownField, kn, m.path, "unknown key %q%s (did you mean %q?)", e.key, where, s)
		} else {
			m.d.errorc(CodeUnknownField, kn, m.path, "unknown key %q%s (expected one of: %s)", e.key, where, strings.Join(list, ", "))
		}
	}
}

// closest returns the candidate within a small edit distance of s, or "".
func closest(s string, candidates []string) string {
	best, bestD := "", 3
	if len(s) <= 3 {
		bestD = 2
	}
	for _, c := range candidates {
		if d := textutil.EditDistance(strings.ToLower(s), c, false); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}
