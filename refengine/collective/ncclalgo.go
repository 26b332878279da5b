package collective

import (
	"fmt"
	"strings"
)

// NCCLAlgoEnv is the environment variable through which NCCL (and so the reference engine's NCCL
// path) is told which algorithms it may use.
const NCCLAlgoEnv = "NCCL_ALGO"

// ncclAlgoNames are NCCL's algorithm names (ncclAlgoStr), matched case-insensitively; only Ring
// and Tree are modelled here.
var ncclAlgoNames = []string{"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"}

// ncclFuncNames are the collectives an NCCL_ALGO entry may be prefixed with (ncclFuncStr).
var ncclFuncNames = []string{"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"}

const ncclAlgoSyntax = `expected NCCL's syntax with the modelled algorithms Ring and Tree (case-insensitive): ` +
	`a comma-separated list such as "Tree" or "ring,tree", "^" first to exclude instead ("^ring"), ` +
	`optionally per collective ("allreduce:tree", "ring;allreduce:tree")`

// ParseNCCLAlgo reads a value of NCCL_ALGO as NCCL does and returns the algorithm the reference
// engine's NCCL path uses for allreduce: Tree when Tree is the only modelled algorithm allowed,
// Ring otherwise (NCCL's choice between the two depends on size and topology; Ring is the
// model's default, also when both are allowed). An empty value means unset (Ring).
//
// The syntax is NCCL's (2.24 and later; a plain list is what older versions accept too):
// entries separated by ";", each an optional collective prefix ("allreduce:", only the first
// entry may omit it, and then applies to every collective) and a comma-separated list of
// algorithm names, case-insensitive, which a leading "^" turns into a list to exclude. Only the
// entries that apply to allreduce take effect; the others are checked and ignored, since the
// engine runs no other collective.
//
// The model has no NVLS, NVLSTree, CollNetDirect, CollNetChain or PAT (as on a machine without
// NVLink SHARP or a CollNet plugin): allowing one of them for allreduce is an error, because the
// engine could not do what was asked, while excluding one ("^NVLS") is accepted and changes
// nothing. Unknown names, unknown collectives, empty entries and a value that leaves no modelled
// algorithm for allreduce are errors; every error names NCCL_ALGO, the value and what is accepted.
func ParseNCCLAlgo(value string) (Algorithm, error) {
	if strings.TrimSpace(value) == "" {
		return Ring, nil
	}
	bad := func(format string, a ...any) (Algorithm, error) {
		return "", fmt.Errorf("%s=%q: %s; %s", NCCLAlgoEnv, value, fmt.Sprintf(format, a...), ncclAlgoSyntax)
	}
	// allowed[i] says whether ncclAlgoNames[i] may be used for allreduce; all may by default.
	allowed := make([]bool, len(ncclAlgoNames))
	for i := range allowed {
		allowed[i] = true
	}
	var mentioned []int // names explicitly allowed for allreduce by the entries that set them
	for k, entry := range strings.Split(value, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return bad("entry %d is empty", k+1)
		}
		prefix, list, hasPrefix := strings.Cut(entry, ":")
		if !hasPrefix {
			if k > 0 {
				return bad("entry %q has no collective prefix: every entry after the first must start with one (e.g. \"allreduce:\")", entry)
			}
			list, prefix = prefix, ""
		}
		prefix = strings.TrimSpace(prefix)
		forAllReduce := !hasPrefix
		if hasPrefix {
			f := indexFold(ncclFuncNames, prefix)
			if f < 0 {
				return bad("unknown collective %q: expected one of %s", prefix, strings.Join(ncclFuncNames, ", "))
			}
			forAllReduce = ncclFuncNames[f] == "AllReduce"
		}
		list = strings.TrimSpace(list)
		exclude := strings.HasPrefix(list, "^")
		list = strings.TrimPrefix(list, "^")
		set := make([]bool, len(ncclAlgoNames))
		var named []int
		for _, name := range strings.Split(list, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				return bad("empty algorithm name in %q", entry)
			}
			a := indexFold(ncclAlgoNames, name)
			if a < 0 {
				return bad("unknown algorithm %q: NCCL's are %s", name, strings.Join(ncclAlgoNames, ", "))
			}
			set[a] = true
			named = append(named, a)
		}
		if !forAllReduce {
			continue
		}
		// An entry replaces what earlier entries said about allreduce, as in NCCL.
		mentioned = mentioned[:0]
		for i := range allowed {
			allowed[i] = set[i] != exclude
		}
		if !exclude {
			mentioned = append(mentioned, named...)
		}
	}
	for _, a := range mentioned {
		if n := ncclAlgoNames[a]; n != "Ring" && n != "Tree" {
			return bad("algorithm %s is not modelled by the reference engine (it has Ring and Tree only)", n)
		}
	}
	ring, tree := allowed[indexFold(ncclAlgoNames, "ring")], allowed[indexFold(ncclAlgoNames, "tree")]
	switch {
	case tree && !ring:
		return Tree, nil
	case ring:
		return Ring, nil
	}
	return bad("no modelled algorithm is left for allreduce (NCCL would fail: no algorithm/protocol available)")
}

// indexFold is the index of the first element of names equal to s ignoring case, or -1.
func indexFold(names []string, s string) int {
	for i, n := range names {
		if strings.EqualFold(n, s) {
			return i
		}
	}
	return -1
}
