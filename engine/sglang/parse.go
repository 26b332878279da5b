package sglang

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/reckon-ci/reckon/engine/internal/core"
)

const (
	num  = core.NumRE
	unit = core.UnitRE
)

var (
	// prefixRE finds record starts: "[2025-06-12 22:41:35 TP0]", "[22:41:35 TP1]",
	// "[2025-11-04 05:27:13 DP0 TP0 EP0]", "[2025-12-23 14:18:00]", "[gpu_id=0]", "[gpu=0]".
	prefixRE = regexp.MustCompile(`\[(?:\d{4}-\d\d-\d\d[ T])?\d\d:\d\d:\d\d(?:[.,]\d+)?(?: ((?:[A-Z]{1,4}\d+)(?: [A-Z]{1,4}\d+)*))?\]|\[gpu(?:_id)?=(\d+)\]`)

	loadBeginRE = regexp.MustCompile(`Load weight begin\. avail mem=(` + num + `) ?(` + unit + `)`)
	loadEndRE   = regexp.MustCompile(`Load weight end\..*?avail mem=(` + num + `) ?(` + unit + `)(?:[,.]? mem usage=(` + num + `) ?(` + unit + `))?`)
	// draftTypeRE recognises the model class of a speculative-decoding draft model in "Load
	// weight end. type=…" (LlamaForCausalLMEagle3, DeepseekV3ForCausalLMNextN, …).
	draftTypeRE = regexp.MustCompile(`\btype=\w*(?:Eagle|NextN|MTP|Draft|Medusa|DFlash)\w*`)
	kvRE        = regexp.MustCompile(`(?i:KV cache (?:is )?allocated)\b`)
	kvTokensRE  = regexp.MustCompile(`#tokens: (` + num + `)`)
	kSizeRE     = regexp.MustCompile(`\bK size: (` + num + `) ?(` + unit + `)`)
	vSizeRE     = regexp.MustCompile(`\bV size: (` + num + `) ?(` + unit + `)`)
	kvSizeRE    = regexp.MustCompile(`\bKV size: (` + num + `) ?(` + unit + `)`)
	poolEndRE   = regexp.MustCompile(`Memory pool end\. avail mem=(` + num + `) ?(` + unit + `)`)
	graphBegRE  = regexp.MustCompile(`(?i:Capture\b[\w ]*?graph begin)\b.*?avail mem=(` + num + `) ?(` + unit + `)`)
	graphEndRE  = regexp.MustCompile(`(?i:Capture\b[\w ]*?graph end)\.\s*(?:Time elapsed:|elapsed=)\s*(` + num + `)\s*s\b`)
	memUsageRE  = regexp.MustCompile(`mem usage=(` + num + `) ?(` + unit + `)`)
	availMemRE  = regexp.MustCompile(`avail mem=(` + num + `) ?(` + unit + `)`)
	budgetRE    = regexp.MustCompile(`max_total_num_tokens=(` + num + `)`)
	swaFullRE   = regexp.MustCompile(`\bfull_layer_tokens=(` + num + `)`)
	pairRE      = regexp.MustCompile(`(\w+)=(` + num + `)(?: ?(` + unit + `))?`)
	acceptRE    = regexp.MustCompile(`Decode batch.*?accept len: (` + num + `)`)
	argsRE      = regexp.MustCompile(`ServerArgs\(|server_args=`)
	ctxArgRE    = regexp.MustCompile(`\bcontext_length=(\d+)`)
	maxRunArgRE = regexp.MustCompile(`\bmax_running_requests=(\d+)`)
)

func rankKey(m []string) (string, bool) {
	switch {
	case m[1] != "":
		return m[1], true
	case m[2] != "":
		return "TP" + m[2], true
	}
	return "", true
}

type state struct {
	rep           core.Report
	ar            core.AllReduceTracker
	errs          core.ErrorCollector
	loadBegin     core.PerRank
	weights       core.PerRank
	kvTokens      core.PerRank
	swaFull       core.PerRank
	draftRanks    map[string]bool
	draftPools    map[string]bool
	kvGiB         core.PerRank
	postKVAvail   core.PerRank
	graphBegin    core.PerRank
	graphSec      core.PerRank
	graphGiB      core.PerRank
	budgetTokens  core.PerRank
	budgetAvail   core.PerRank
	maxRunning    core.PerRank
	contextLen    core.PerRank
	accept        core.Mean
	argContext    *int64
	argMaxRunning *int64
	sawKVOrGraph  bool
}

// Parse reads an SGLang log (any version) into a Report. See docs/logs.md for what each field
// is read from.
func Parse(r io.Reader) (*core.Report, error) {
	s := &state{}
	err := core.ScanLines(r, func(n int, line string) error {
		s.errs.Line(n, line)
		if strings.Contains(line, ReadyText) {
			s.rep.Ready = true
		}
		for _, seg := range core.SplitSegments(line, prefixRE, rankKey, "") {
			s.record(seg.Rank, seg.Text)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sglang log: %w", err)
	}
	return s.report(), nil
}

func gib(v, u string) float64 {
	f, err := core.ParseNum(v)
	if err != nil {
		return 0
	}
	return core.ToGiB(f, u)
}

// match runs re on t only when t contains the literal key (regexps are the parser's cost).
func match(re *regexp.Regexp, t, key string) []string {
	if !strings.Contains(t, key) {
		return nil
	}
	return re.FindStringSubmatch(t)
}

func matchIndex(re *regexp.Regexp, t, key string) []int {
	if !strings.Contains(t, key) {
		return nil
	}
	return re.FindStringIndex(t)
}

func matchSubIndex(re *regexp.Regexp, t, key string) []int {
	if !strings.Contains(t, key) {
		return nil
	}
	return re.FindStringSubmatchIndex(t)
}

func numOf(v string) float64 {
	f, _ := core.ParseNum(v)
	return f
}

func (s *state) record(rank, t string) {
	if strings.Contains(t, "**") {
		t = strings.ReplaceAll(t, "**", "") // markdown bold of logs pasted into issues
	}
	s.ar.Record(t)
	if !strings.Contains(t, "=") && !strings.Contains(t, "allocated") && !strings.Contains(t, "accept len") && !strings.Contains(t, "graph end") {
		return // every record this parser reads has a key=value or one of these words
	}
	if m := match(loadBeginRE, t, "Load weight begin"); m != nil {
		s.loadBegin.First(rank, gib(m[1], m[2]))
	}
	if m := match(loadEndRE, t, "Load weight end"); m != nil {
		if draftTypeRE.MatchString(t) {
			// A draft model loads after the target: neither its weights nor the KV pool the
			// rank allocates after it are the target's.
			if s.draftRanks == nil {
				s.draftRanks, s.draftPools = map[string]bool{}, map[string]bool{}
			}
			s.draftRanks[rank] = true
		} else if m[3] != "" {
			s.weights.First(rank, gib(m[3], m[4]))
		} else if b, ok := s.loadBegin.Get(rank); ok {
			s.weights.First(rank, b-gib(m[1], m[2]))
		}
	}
	if loc := matchIndex(kvRE, t, "llocated"); loc != nil && !s.isDraftPool(rank, t[loc[1]:]) {
		rest := t[loc[1]:]
		if m := kvTokensRE.FindStringSubmatch(rest); m != nil {
			s.kvTokens.First(rank, numOf(m[1]))
		}
		k, v, kv := kSizeRE.FindStringSubmatch(rest), vSizeRE.FindStringSubmatch(rest), kvSizeRE.FindStringSubmatch(rest)
		switch {
		case k != nil && v != nil:
			s.kvGiB.First(rank, gib(k[1], k[2])+gib(v[1], v[2]))
		case kv != nil:
			s.kvGiB.First(rank, gib(kv[1], kv[2]))
		}
		s.sawKVOrGraph = true
	}
	if m := match(swaFullRE, t, "full_layer_tokens="); m != nil {
		// Sliding-window models: the "KV Cache is allocated" #tokens is the SWA pool; the
		// capacity a request can use is the full-attention layers' pool.
		s.swaFull.First(rank, numOf(m[1]))
	}
	if m := match(poolEndRE, t, "Memory pool end"); m != nil {
		s.postKVAvail.Last(rank, gib(m[1], m[2]))
		s.sawKVOrGraph = true
	}
	if m := match(graphBegRE, t, "graph begin"); m != nil {
		s.graphBegin.Last(rank, gib(m[1], m[2]))
	}
	if loc := matchSubIndex(graphEndRE, t, "graph end"); loc != nil {
		s.graphSec.Add(rank, numOf(t[loc[2]:loc[3]]))
		rest := t[loc[1]:]
		usage, haveUsage := 0.0, false
		if m := memUsageRE.FindStringSubmatch(rest); m != nil {
			usage, haveUsage = gib(m[1], m[2]), true
		}
		if m := availMemRE.FindStringSubmatch(rest); m != nil {
			avail := gib(m[1], m[2])
			s.postKVAvail.Last(rank, avail)
			if b, ok := s.graphBegin.Get(rank); ok && !haveUsage {
				usage, haveUsage = b-avail, true
			}
		}
		if haveUsage {
			s.graphGiB.Add(rank, usage)
		}
		s.sawKVOrGraph = true
	}
	if strings.Contains(t, "max_total_num_tokens=") && budgetRE.MatchString(t) {
		for _, m := range pairRE.FindAllStringSubmatch(t, -1) {
			v := numOf(m[2])
			switch m[1] {
			case "max_total_num_tokens":
				s.budgetTokens.First(rank, v)
			case "max_running_requests":
				s.maxRunning.First(rank, v)
			case "context_len":
				s.contextLen.First(rank, v)
			case "available_gpu_mem":
				s.budgetAvail.First(rank, core.ToGiB(v, m[3]))
			}
		}
	}
	if m := match(acceptRE, t, "accept len"); m != nil {
		s.accept.Add(numOf(m[1]), 1)
	}
	if (strings.Contains(t, "ServerArgs(") || strings.Contains(t, "server_args=")) && argsRE.MatchString(t) {
		if m := ctxArgRE.FindStringSubmatch(t); m != nil && s.argContext == nil {
			s.argContext = core.Int(int64(numOf(m[1])))
		}
		if m := maxRunArgRE.FindStringSubmatch(t); m != nil && s.argMaxRunning == nil {
			s.argMaxRunning = core.Int(int64(numOf(m[1])))
		}
	}
}

// isDraftPool reports whether a "KV Cache is allocated" record (rest: the text after it) is a
// speculative draft model's pool: allocated by a rank after it loaded a draft model, or
// identical to such a pool of another rank (draft pools are the same on every rank, and a
// rank's draft "Load weight end" may be cut from an excerpt).
func (s *state) isDraftPool(rank, rest string) bool {
	if s.draftRanks == nil {
		return false
	}
	sig := strings.TrimSpace(rest)
	if s.draftRanks[rank] {
		s.draftPools[sig] = true
		return true
	}
	return s.draftPools[sig]
}

func (s *state) report() *core.Report {
	r := s.rep
	r.Engine = Name
	r.AllReduce, r.CustomAllReduceDisabledReason = s.ar.Result()
	r.WeightsGiB = s.weights.Min()
	switch {
	case s.budgetTokens.Len() > 0:
		r.KVCacheTokens = s.budgetTokens.MinInt()
	case s.swaFull.Len() > 0:
		r.KVCacheTokens = s.swaFull.MinInt()
	default:
		r.KVCacheTokens = s.kvTokens.MinInt()
	}
	r.KVCacheGiB = s.kvGiB.Min()
	if s.budgetAvail.Len() > 0 {
		r.AvailableGPUMemGiB = s.budgetAvail.Min()
	} else if s.sawKVOrGraph {
		r.AvailableGPUMemGiB = s.postKVAvail.Min()
	}
	r.CUDAGraphSeconds = s.graphSec.Max()
	r.CUDAGraphGiB = s.graphGiB.Min()
	r.MaxRunningRequests = s.maxRunning.MinInt()
	if r.MaxRunningRequests == nil {
		r.MaxRunningRequests = s.argMaxRunning
	}
	r.ContextLen = s.contextLen.MinInt()
	if r.ContextLen == nil {
		r.ContextLen = s.argContext
	}
	r.SpecAcceptLength = s.accept.Value()
	r.Errors = s.errs.Errors()
	return &r
}
