package strictjson

import (
	"strconv"
	"strings"
	"testing"
)

func TestDuplicateKey(t *testing.T) {
	free := func(field string) bool { return field == "metrics" }
	for _, tc := range []struct{ doc, want string }{
		{`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":1}]}`, ""},
		{`{"schema":"x","configs":[{"n":1}],"configs":[]}`, `configs: line 1, column 35: duplicate key "configs"`},
		{`{"configs":[1],
 "Configs":[]}`, `Configs: line 2, column 2: duplicate key "Configs": it appears twice in one object (keys are matched to fields ignoring case)`},
		{`{"c":[{"x":1},{"y":{"k":1,"\u006b":2}}]}`, `c[1].y.k: line 1, column 27: duplicate key "k"`},
		{`{"c":[{"metrics":{"TTFT":1,"ttft":2}}]}`, ""},
		{`{"c":[{"metrics":{"ttft":1,"ttft":2}}]}`, `c[0].metrics.ttft: line 1, column 28: duplicate key "ttft": it appears twice in one`},
		{`{"s":"a\"b","t":"{\"s\":1}","s\"":1}`, ""},
		{`{"k":"\\","k":1}`, `k: line 1, column 11: duplicate key "k"`},
	} {
		p, ok := DuplicateKey([]byte(tc.doc), free)
		got := ""
		if ok {
			got = p.Path + ": line " + strconv.Itoa(p.Line) + ", column " + strconv.Itoa(p.Column) + ": " + p.Msg
		}
		switch {
		case tc.want == "" && ok:
			t.Errorf("%s: %s", tc.doc, got)
		case tc.want != "" && !strings.HasPrefix(got, tc.want):
			t.Errorf("%s:\n got %q\nwant %q", tc.doc, got, tc.want)
		}
	}
}
