package gate

import (
	"strings"
	"testing"
)

func ev(sources ...AllReduceSource) *AllReduceEvidence {
	e := CombineAllReduce(sources)
	return &e
}

func TestCombineAllReduce(t *testing.T) {
	e := CombineAllReduce([]AllReduceSource{
		{Source: SourceProfiler, Says: BackendNCCL, Detail: "0 custom / 96 NCCL allreduce kernels on 4 ranks", NCCLAlgorithms: []string{"RING"}},
		{Source: SourceLog, Says: BackendCustom},
	})
	if e.Effective != BackendNCCL || e.From != SourceProfiler || !strings.Contains(e.Disagreement, "log says custom") {
		t.Errorf("kernels beat the log, and the disagreement is kept: %+v", e)
	}
	e = CombineAllReduce([]AllReduceSource{{Source: SourceProfiler, Says: BackendUnknown, Detail: "POST /start_profile: HTTP 404"}, {Source: SourceLog, Says: BackendUnknown, Detail: "no allreduce record"}})
	if e.Effective != BackendUnknown || e.Tried() != "profiler: POST /start_profile: HTTP 404; log: no allreduce record" {
		t.Errorf("nothing known: %+v / %q", e, e.Tried())
	}
	v := ExpectAllReduce("expect a allreduce == custom", &e, BackendCustom)
	if v.Outcome != Error || !strings.Contains(v.Message, "cannot tell which allreduce ran") || !strings.Contains(v.Message, "HTTP 404") {
		t.Errorf("no evidence is an error naming what was tried: %+v", v)
	}
	v = ExpectAllReduce("x", ev(AllReduceSource{Source: SourceProfiler, Says: BackendNCCL}), BackendCustom)
	if v.Outcome != Fail {
		t.Errorf("custom expected, nccl ran: %+v", v)
	}
	v = ExpectAllReduce("x", ev(AllReduceSource{Source: SourceProfiler, Says: BackendCustom, Detail: "8 custom / 2 NCCL"}), BackendCustom)
	if v.Outcome != Pass {
		t.Errorf("custom ran: %+v", v)
	}
}

func TestEquivalenceExercised(t *testing.T) {
	nccl := EquivalenceSide{Config: "nccl", Requested: BackendNCCL, AllReduce: ev(AllReduceSource{Source: SourceProfiler, Says: BackendNCCL, NCCLAlgorithms: []string{"RING"}})}
	custom := EquivalenceSide{Config: "custom-ar", Requested: BackendCustom, AllReduce: ev(AllReduceSource{Source: SourceProfiler, Says: BackendCustom})}
	fellBack := EquivalenceSide{Config: "custom-ar", Requested: BackendCustom, AllReduce: ev(
		AllReduceSource{Source: SourceProfiler, Says: BackendNCCL, NCCLAlgorithms: []string{"RING"}},
		AllReduceSource{Source: SourceLog, Says: BackendNCCL, Detail: "it's not supported on more than two PCIe-only GPUs"})}
	unknown := EquivalenceSide{Config: "custom-ar", Requested: BackendCustom, AllReduce: ev(AllReduceSource{Source: SourceLog, Says: BackendUnknown, Detail: "no allreduce record"})}
	tree := EquivalenceSide{Config: "nccl-tree", Requested: BackendNCCL, NCCLAlgo: "Tree", AllReduce: ev(AllReduceSource{Source: SourceProfiler, Says: BackendNCCL, NCCLAlgorithms: []string{"TREE"}})}
	treeIgnored := tree
	treeIgnored.AllReduce = ev(AllReduceSource{Source: SourceProfiler, Says: BackendNCCL, NCCLAlgorithms: []string{"RING"}})
	eagle := EquivalenceSide{Config: "eagle3", Requested: BackendCustom, AllReduce: custom.AllReduce, Speculative: true}
	for _, tc := range []struct {
		name       string
		base, head EquivalenceSide
		twin       *EquivalenceSide
		want       string // "" = exercised
	}{
		{"custom vs nccl", nccl, custom, &tree, ""},
		{"custom fell back to nccl", nccl, fellBack, &tree, "custom-ar and nccl both ran nccl allreduce: nothing was compared (custom-ar asked for custom, ran nccl; engine said: it's not supported"},
		{"no evidence", nccl, unknown, nil, "cannot show that custom-ar (asks for custom allreduce) and nccl (asks for nccl) ran different allreduces: no evidence for custom-ar (log: no allreduce record)"},
		{"twin ignored NCCL_ALGO", nccl, custom, &treeIgnored, "twin nccl-tree cannot be shown to sum in another order than base nccl (NCCL non-TREE kernels on both"},
		{"speculation skipped", custom, func() EquivalenceSide { e := eagle; e.SpecWhy = "0 drafts for 32 requests"; return e }(), nil, "eagle3: speculative decoding did not demonstrably run for the numerics probe's requests, so eagle3 was compared with plain decoding: 0 drafts for 32 requests"},
		{"speculation ran", custom, func() EquivalenceSide { e := eagle; e.SpecRan = true; return e }(), nil, ""},
	} {
		err := EquivalenceExercised(tc.base, tc.head, tc.twin)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}
