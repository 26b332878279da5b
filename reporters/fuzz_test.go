package reporters

import (
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// FuzzDecodeResults: the results reader never panics, and a run it accepts renders to Markdown
// (issue 25, item 8). Seeds: testdata/fuzz/FuzzDecodeResults (shard results of the fixtures).
func FuzzDecodeResults(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := gate.DecodeResults(data)
		if err != nil {
			return
		}
		if r == nil {
			t.Fatal("no run and no error")
		}
		_ = renderMarkdown(r, MaxMarkdownBytes)
	})
}
