package strictjson

import (
	"fmt"
	"reflect"
	"testing"
)

type item struct {
	Name    string   `json:"name"`
	Value   float64  `json:"value"`
	Skipped bool     `json:"skipped,omitempty"`
	Tags    []string `json:"tags,omitempty"`
}

type doc struct {
	Schema string `json:"schema"`
	Items  []item `json:"items"`
}

// check returns the problems of data as "line:col path: msg".
func check(data string, opts Options) []string {
	var out []string
	opts.Report = func(p Problem) {
		out = append(out, fmt.Sprintf("%d:%d %s: %s", p.Line, p.Column, p.Path, p.Msg))
	}
	Check([]byte(data), reflect.TypeFor[doc](), opts)
	return out
}

func TestCheck(t *testing.T) {
	optional := func(t reflect.Type, name string, present map[string]bool) bool {
		return t == reflect.TypeFor[item]() && name == "value" && present["skipped"]
	}
	for _, c := range []struct {
		name, data string
		opts       Options
		want       []string
	}{
		{"valid", `{"schema": "x", "items": [{"name": "a", "value": 1}]}`, Options{}, nil},
		{"empty", "  \n", Options{Expected: `a JSON object with "schema"`}, []string{`0:0 : empty input, expected a JSON object with "schema"`}},
		{"empty default", "", Options{}, []string{`0:0 : empty input, expected a JSON object`}},
		{"misspelt", "{\"schema\": \"x\",\n \"itmes\": []}", Options{},
			[]string{`2:2 itmes: unknown field "itmes" in the document (did you mean "items"?), expected one of items, schema`}},
		{"missing", `{"schema": "x", "items": [{"name": "a"}]}`, Options{},
			[]string{`1:27 items[0].value: items[0]: missing required field "value" (a number)`}},
		{"optional", `{"schema": "x", "items": [{"name": "a", "skipped": true}]}`, Options{Optional: optional}, nil},
		{"null and type", `{"schema": null, "items": [{"name": 3, "value": 1}]}`, Options{},
			[]string{`1:12 schema: field "schema": null, expected a string`, `1:37 items[0].name: field "items[0].name": got number 3, expected a string`}},
		{"twice", `{"schema": "x", "schema": "y", "items": []}`, Options{},
			[]string{`1:17 schema: field "schema": appears twice in this object, expected each field once`}},
		{"nan", `{"schema": "x", "items": [{"name": "a", "value": NaN}]}`, Options{NonFinite: "write 1e300"},
			[]string{`1:50 items[0].value: not valid JSON (in items[0].value): NaN is not a JSON number, expected a finite number (Python's json.dumps writes NaN and Infinity unless allow_nan=False; write 1e300)`}},
		{"trailing", `{"schema": "x", "items": []} {}`, Options{Document: "the test's object"},
			[]string{`1:30 : trailing data after the test's object (an object), expected one JSON object per file`}},
	} {
		got := check(c.data, c.opts)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got\n%q\nwant\n%q", c.name, got, c.want)
		}
	}
}

func TestLocate(t *testing.T) {
	data := []byte("{\"schema\": \"x\",\n \"items\": [\n  {\"name\": \"a\", \"value\": 1}]}")
	d := Check(data, reflect.TypeFor[doc](), Options{Report: func(p Problem) { t.Errorf("problem %+v", p) }})
	for path, want := range map[string][2]int{
		"items[0].value":   {3, 26},
		"items[0].missing": {3, 3},
		"nothing":          {1, 1},
		"":                 {1, 1},
	} {
		if l, c := d.Locate(path); l != want[0] || c != want[1] {
			t.Errorf("Locate(%q) = %d:%d, want %d:%d", path, l, c, want[0], want[1])
		}
	}
}

func TestLineCol(t *testing.T) {
	data := []byte("ab\ncd")
	for off, want := range map[int][2]int{-1: {1, 1}, 0: {1, 1}, 2: {1, 3}, 3: {2, 1}, 5: {2, 3}, 99: {2, 3}} {
		if l, c := LineCol(data, off); l != want[0] || c != want[1] {
			t.Errorf("LineCol(%d) = %d:%d, want %v", off, l, c, want)
		}
	}
}
