package collective

import (
	"strings"
	"testing"
)

func TestParseNCCLAlgo(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Algorithm
	}{
		{"", Ring},
		{"  ", Ring},
		{"Ring", Ring},
		{"ring", Ring},
		{"Tree", Tree},
		{"TREE", Tree},
		{" tree ", Tree},
		{"Ring,Tree", Ring}, // both allowed: the model's default
		{"tree,ring", Ring},
		{"^ring", Tree},
		{"^Tree", Ring},
		{"^NVLS", Ring}, // excluding an algorithm the model lacks changes nothing
		{"^nvls,collnetdirect,collnetchain,nvlstree,pat", Ring},
		{"^ring,nvls", Tree},
		{"allreduce:tree", Tree},
		{"AllReduce:Tree", Tree},
		{"allreduce:ring,tree", Ring},
		{"allreduce:^ring", Tree},
		{"ring;allreduce:tree", Tree}, // the allreduce entry overrides the global one
		{"tree;allreduce:ring", Ring}, // and the other way round
		{"tree;allgather:ring", Tree}, // entries for other collectives do not touch allreduce
		{"allgather:nvls", Ring},      // another collective's algorithm: checked, then ignored
		{"broadcast:ring;allreduce:tree", Tree},
		{"allreduce:tree;allreduce:ring", Ring}, // a later entry replaces an earlier one
	} {
		got, err := ParseNCCLAlgo(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseNCCLAlgo(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"NVLS", "algorithm NVLS is not modelled"},
		{"nvlstree", "algorithm NVLSTree is not modelled"},
		{"CollNetDirect", "algorithm CollNetDirect is not modelled"},
		{"collnetchain", "algorithm CollNetChain is not modelled"},
		{"PAT", "algorithm PAT is not modelled"},
		{"ring,nvls", "algorithm NVLS is not modelled"},
		{"allreduce:tree,nvls", "algorithm NVLS is not modelled"},
		{"rings", `unknown algorithm "rings"`},
		{"garbage!", `unknown algorithm "garbage!"`},
		{"1", `unknown algorithm "1"`},
		{"ring,", "empty algorithm name"},
		{"^", "empty algorithm name"},
		{"allreduce:", "empty algorithm name"},
		{"allreduce:tree;", "entry 2 is empty"},
		{"allreduce:tree;ring", "has no collective prefix"},
		{"alltoall:ring", `unknown collective "alltoall"`},
		{"^ring,tree", "no modelled algorithm is left for allreduce"},
		{"allreduce:^tree,ring", "no modelled algorithm is left for allreduce"},
	} {
		_, err := ParseNCCLAlgo(tc.in)
		if err == nil {
			t.Errorf("ParseNCCLAlgo(%q) accepted", tc.in)
			continue
		}
		msg := err.Error()
		// every error names the variable, quotes the value and says what is accepted
		for _, part := range []string{tc.want, "NCCL_ALGO=" + quote(tc.in), "Ring and Tree"} {
			if !strings.Contains(msg, part) {
				t.Errorf("ParseNCCLAlgo(%q): error %q lacks %q", tc.in, msg, part)
			}
		}
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
