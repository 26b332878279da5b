package textutil

import "testing"

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b        string
		plain, swap int
	}{
		{"", "", 0, 0},
		{"", "abc", 3, 3},
		{"abc", "", 3, 3},
		{"kitten", "sitting", 3, 3},
		{"max_rel_err", "max_rel_err", 0, 0},
		{"max_rle_err", "max_rel_err", 2, 1},
		{"ab", "ba", 2, 1},
		{"ca", "abc", 3, 3}, // the optimal string alignment distance does not edit a swapped pair again
		{"nccl", "ncl", 1, 1},
		{"latency", "latnecy", 2, 1},
	} {
		if got := EditDistance(c.a, c.b, false); got != c.plain {
			t.Errorf("EditDistance(%q, %q, false) = %d, want %d", c.a, c.b, got, c.plain)
		}
		if got := EditDistance(c.a, c.b, true); got != c.swap {
			t.Errorf("EditDistance(%q, %q, true) = %d, want %d", c.a, c.b, got, c.swap)
		}
	}
}
