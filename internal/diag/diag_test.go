package diag

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestErrorForm(t *testing.T) {
	for _, c := range []struct {
		d    Diagnostic
		want string
	}{
		{Diagnostic{File: "a.yaml", Line: 3, Column: 5, Field: "configs[1].name", Msg: "must not be empty"}, "a.yaml:3:5: configs[1].name: must not be empty"},
		{Diagnostic{File: "a.yaml", Msg: "read spec: no such file"}, "a.yaml: read spec: no such file"},
		{Diagnostic{Severity: Warning, File: "a.yaml", Line: 6, Field: "check x", Msg: "uncalibrated"}, "a.yaml:6: warning: check x: uncalibrated"},
		{Diagnostic{File: "a.yaml", Line: 1, Column: 1, Msg: "bad", Detail: "why\nand how"}, "a.yaml:1:1: bad\n  why\n  and how"},
	} {
		if got := c.d.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}

func TestListSortedAndSplit(t *testing.T) {
	l := List{
		{Severity: Warning, File: "f", Line: 9, Msg: "w9"},
		{File: "f", Line: 3, Column: 7, Msg: "e3"},
		{File: "f", Msg: "e0"},
		{Severity: Warning, File: "f", Line: 3, Column: 2, Msg: "w3"},
		{File: "f", Line: 3, Column: 7, Msg: "e3"}, // a duplicate
	}.Sorted()
	var got []string
	for _, d := range l {
		got = append(got, d.Msg)
	}
	if want := "e0 w3 e3 w9"; strings.Join(got, " ") != want {
		t.Errorf("order %q, want %q", strings.Join(got, " "), want)
	}
	if !l.HasErrors() || len(l.Only(Warning)) != 2 || len(l.Only(Error)) != 2 || l.Only(Warning).HasErrors() {
		t.Errorf("split: %v", l)
	}
	var d *Diagnostic
	if !errors.As(error(l), &d) || d.Msg != "e0" {
		t.Errorf("errors.As: %v", d)
	}
}

func TestJSON(t *testing.T) {
	b, err := json.Marshal(Diagnostic{Severity: Warning, Code: "missing-path", File: "f", Line: 2, Field: "x", Msg: "m"})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"severity":"warning","code":"missing-path","file":"f","line":2,"field":"x","message":"m"}`
	if string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var d Diagnostic
	if err := json.Unmarshal(b, &d); err != nil || d.Severity != Warning || d.Code != "missing-path" {
		t.Errorf("read back %+v, %v", d, err)
	}
	if err := json.Unmarshal([]byte(`{"severity":"fatal"}`), &d); err == nil {
		t.Error("severity fatal accepted")
	}
}
