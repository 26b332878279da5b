// Package strictjson checks a JSON document against a Go struct type token by token, so that
// every departure from the type is a problem carrying its line, column and JSON path
// (results[3].algorithms[1].max_rel_err): an unknown or misspelt field, a missing required
// field (one not tagged omitempty), a duplicated field, null where no pointer or slice is, a
// value of the wrong type, NaN or Infinity, a syntax error and trailing data. encoding/json alone
// reports neither indices nor positions, matches field names case-insensitively, and decodes
// null and missing fields as zero.
//
// The checker knows no particular document: the caller names what an empty document should
// have been, what to advise about non-finite numbers, which required fields a document may leave
// out, and receives the problems. Once a document passes, the caller decodes it with
// encoding/json and can locate the paths its own rules find fault with (Doc.Locate).
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/internal/textutil"
)

// Problem is one way a document departs from its type.
type Problem struct {
	// Path is the JSON path of the offending value, e.g. "results[3].algorithms[1].max_rel_err";
	// "" for the document itself.
	Path string
	// Line and Column locate the value in the document (1-based, the column in bytes).
	Line, Column int
	// Msg says what is wrong and what was expected.
	Msg string
}

// Options adapt the checker's messages and rules to one kind of document.
type Options struct {
	// Expected completes the message for an empty document ("empty input, expected " +
	// Expected), e.g. `a JSON object with "schema": "reckon.allreduce-probe/v2"`; "" for
	// "a JSON object".
	Expected string
	// Document names the top-level value in the message about trailing data ("trailing data
	// after " + Document), e.g. "the probe's JSON object"; "" for "the JSON object".
	Document string
	// NonFinite is advice appended to the message about NaN or Infinity, after the note that
	// Python's json.dumps writes them, e.g. how to write a non-finite value instead; "" for none.
	NonFinite string
	// Optional, when set, says whether the required field name of struct type t may be left
	// out given the fields present in its object (e.g. a skipped item's metrics).
	Optional func(t reflect.Type, name string, present map[string]bool) bool
	// Report receives each problem, in document order. Required.
	Report func(Problem)
}

// Doc is a document that has been checked: its bytes and where each path's value starts.
type Doc struct {
	data []byte
	pos  map[string]int // JSON path -> byte offset where its value starts
}

// Check walks data against type t (a struct type, or a pointer to one), reporting every problem
// to opts.Report, and returns the document for Locate. The walk goes on past problems of shape
// (skipping the offending value) and stops at the first syntax error.
func Check(data []byte, t reflect.Type, opts Options) *Doc {
	w := &walker{Doc: &Doc{data: data, pos: map[string]int{}}, opts: opts}
	w.document(t)
	return w.Doc
}

// walker is one walk of a document.
type walker struct {
	*Doc
	dec  *json.Decoder
	opts Options
}

// errStop ends the walk after a syntax error: nothing after it can be trusted.
var errStop = errors.New("stop")

func (w *walker) document(t reflect.Type) {
	if len(bytes.TrimSpace(w.data)) == 0 {
		expected := w.opts.Expected
		if expected == "" {
			expected = "a JSON object"
		}
		w.opts.Report(Problem{Msg: "empty input, expected " + expected})
		return
	}
	w.dec = json.NewDecoder(bytes.NewReader(w.data))
	w.dec.UseNumber()
	if err := w.value("", t); err != nil {
		return
	}
	off := w.valueStart()
	if tok, err := w.dec.Token(); err != io.EOF {
		what := "more data"
		if err == nil {
			what = describeToken(tok)
		}
		doc := w.opts.Document
		if doc == "" {
			doc = "the JSON object"
		}
		w.problemAt(off, "", "trailing data after %s (%s), expected one JSON object per file", doc, what)
	}
}

// problemAt records a problem about the value at path, found at byte offset off.
func (w *walker) problemAt(off int, path, format string, args ...any) {
	line, col := LineCol(w.data, off)
	w.opts.Report(Problem{Path: path, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)})
}

// fieldProblem records a problem with the value of the field at path, prefixing the message with
// `field "PATH": `.
func (w *walker) fieldProblem(off int, path, format string, args ...any) {
	if path == "" {
		w.problemAt(off, path, "the document: %s", fmt.Sprintf(format, args...))
		return
	}
	w.problemAt(off, path, "field %q: %s", path, fmt.Sprintf(format, args...))
}

// valueStart is the offset of the next value: past whitespace, ':' and ',' after the decoder's
// position.
func (w *walker) valueStart() int {
	off := int(w.dec.InputOffset())
	for off < len(w.data) {
		switch w.data[off] {
		case ' ', '\t', '\r', '\n', ':', ',':
			off++
			continue
		}
		break
	}
	return off
}

// token reads the next token, turning a syntax error or a premature end into a problem at path.
func (w *walker) token(path string) (json.Token, int, error) {
	off := w.valueStart()
	tok, err := w.dec.Token()
	if err == nil {
		return tok, off, nil
	}
	where := ""
	if path != "" {
		where = fmt.Sprintf(" (in %s)", path)
	}
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// The decoder's offsets are relative to its buffer; a one-shot scan of the whole
		// document gives the absolute offset of the first syntax error.
		bad := off
		var v any
		if uerr := json.Unmarshal(w.data, &v); errors.As(uerr, &se) {
			bad = int(se.Offset) - 1
		}
		bad = max(0, min(bad, len(w.data)))
		if lit, start := NonFiniteAt(w.data, bad); lit != "" {
			advice := ""
			if w.opts.NonFinite != "" {
				advice = "; " + w.opts.NonFinite
			}
			w.problemAt(start, path, "not valid JSON%s: %s is not a JSON number, expected a finite number (Python's json.dumps writes NaN and Infinity unless allow_nan=False%s)", where, lit, advice)
		} else {
			w.problemAt(bad, path, "not valid JSON%s: %v", where, err)
		}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		w.problemAt(len(w.data), path, "unexpected end of input%s, expected the rest of the document (is the file truncated?)", where)
	default:
		w.problemAt(off, path, "not valid JSON%s: %v", where, err)
	}
	return nil, off, errStop
}

// value checks the next value against t. Problems of shape are recorded and the value skipped;
// only a syntax error stops the walk (errStop).
func (w *walker) value(path string, t reflect.Type) error {
	tok, off, err := w.token(path)
	if err != nil {
		return err
	}
	w.pos[path] = off
	if tok == nil { // null
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice:
			return nil
		}
		w.fieldProblem(off, path, "null, expected %s", describeType(t))
		return nil
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	mismatch := func() error {
		w.fieldProblem(off, path, "got %s, expected %s", describeToken(tok), describeType(t))
		return w.skip(tok, path)
	}
	switch t.Kind() {
	case reflect.Struct:
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return mismatch()
		}
		return w.object(path, off, t)
	case reflect.Slice:
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return mismatch()
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(fmt.Sprintf("%s[%d]", path, i), t.Elem()); err != nil {
				return err
			}
		}
		_, _, err := w.token(path) // ']'
		return err
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return mismatch()
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return mismatch()
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := tok.(json.Number)
		if !ok {
			return mismatch()
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			w.fieldProblem(off, path, "%s, expected an integer that fits in %d bits", n, t.Bits())
		}
	case reflect.Float64, reflect.Float32:
		n, ok := tok.(json.Number)
		if !ok {
			return mismatch()
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			w.fieldProblem(off, path, "%s is out of range, expected a finite number", n)
		}
	default:
		// A field type this walker does not know: accept any value (encoding/json will judge it).
		return w.skip(tok, path)
	}
	return nil
}

// object checks the members of an object whose '{' has been read against struct type t.
func (w *walker) object(path string, off int, t reflect.Type) error {
	fields := jsonFields(t)
	present := map[string]bool{}
	suggested := map[string]bool{} // known names an unknown key was taken for
	for w.dec.More() {
		tok, koff, err := w.token(path)
		if err != nil {
			return err
		}
		key, _ := tok.(string) // the decoder guarantees object keys are strings
		kpath := joinPath(path, key)
		f, known := fields[key]
		switch {
		case present[key]:
			w.fieldProblem(koff, kpath, "appears twice in this object, expected each field once")
		case !known:
			hint := ""
			if guess := didYouMean(key, fields); guess != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", guess)
				suggested[guess] = true
			}
			w.problemAt(koff, kpath, "unknown field %q in %s%s, expected one of %s", key, orDocument(path), hint, fieldList(fields))
		}
		present[key] = true
		if !known {
			if err := w.skipValue(kpath); err != nil {
				return err
			}
			continue
		}
		if err := w.value(kpath, f.typ); err != nil {
			return err
		}
	}
	if _, _, err := w.token(path); err != nil { // '}'
		return err
	}
	for _, name := range fieldOrder(t) {
		f := fields[name]
		if !present[name] && !suggested[name] && f.required && (w.opts.Optional == nil || !w.opts.Optional(t, name, present)) {
			w.problemAt(off, joinPath(path, name), "%s: missing required field %q (%s)", orDocument(path), name, describeType(f.typ))
		}
	}
	return nil
}

// skipValue reads and discards the next value.
func (w *walker) skipValue(path string) error {
	tok, _, err := w.token(path)
	if err != nil {
		return err
	}
	return w.skip(tok, path)
}

// skip discards the rest of a value whose first token is tok.
func (w *walker) skip(tok json.Token, path string) error {
	d, ok := tok.(json.Delim)
	if !ok || (d != '{' && d != '[') {
		return nil
	}
	for depth := 1; depth > 0; {
		t, _, err := w.token(path)
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

// Locate finds the line and column of the value at path, or of its nearest ancestor the walk
// reached; 0, 0 when none.
func (d *Doc) Locate(path string) (int, int) {
	for {
		if off, ok := d.pos[path]; ok {
			return LineCol(d.data, off)
		}
		if path == "" {
			return 0, 0
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			path = ""
		} else {
			path = path[:i]
		}
	}
}

type jsonField struct {
	typ      reflect.Type
	required bool
}

// jsonFields maps t's JSON field names to their types; a field is required unless tagged
// omitempty.
func jsonFields(t reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = jsonField{typ: f.Type, required: !strings.Contains(","+opts+",", ",omitempty,")}
	}
	return out
}

// fieldOrder lists t's JSON field names in declaration order.
func fieldOrder(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

func fieldList(fields map[string]jsonField) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// didYouMean returns the known field a misspelt key most likely meant, or "": the same name in
// another case or with '-' for '_', one edit (or one transposition) away, or a longer or shorter
// form of it (max_rel_error for max_rel_err).
func didYouMean(key string, fields map[string]jsonField) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	k := norm(key)
	for n := range fields {
		if norm(n) == k {
			return n
		}
	}
	best := ""
	for n := range fields {
		near := closeSpelling(k, n) ||
			(min(len(k), len(n)) >= 4 && (strings.HasPrefix(k, n) || strings.HasPrefix(n, k)))
		if near && (best == "" || n < best) {
			best = n
		}
	}
	return best
}

// closeSpelling reports whether a and b differ by at most one insertion, deletion, substitution
// or transposition of adjacent characters.
func closeSpelling(a, b string) bool {
	return textutil.EditDistance(a, b, true) <= 1
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orDocument(path string) string {
	if path == "" {
		return "the document"
	}
	return path
}

func describeType(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		return "an object"
	case reflect.Slice:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	}
	return t.String()
}

func describeToken(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		switch v {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return fmt.Sprintf("%q", string(v))
	case string:
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		return fmt.Sprintf("string %q", v)
	case json.Number:
		return "number " + string(v)
	case bool:
		return fmt.Sprintf("%v", v)
	}
	return fmt.Sprintf("%v", tok)
}

// NonFiniteAt reports which of Python's non-standard literals (NaN, Infinity, -Infinity) starts
// at or just before off, and where; "" when none does.
func NonFiniteAt(data []byte, off int) (string, int) {
	for _, lit := range []string{"-Infinity", "Infinity", "NaN"} {
		for start := max(0, off-1); start <= off && start < len(data); start++ {
			if bytes.HasPrefix(data[start:], []byte(lit)) {
				return lit, start
			}
		}
	}
	return "", off
}

// LineCol converts a byte offset into data into a 1-based line and column (in bytes); an offset
// out of range is clamped.
func LineCol(data []byte, off int) (int, int) {
	off = max(0, min(off, len(data)))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return line, col
}
