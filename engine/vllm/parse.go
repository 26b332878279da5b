package vllm

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
	// prefixRE finds record starts: a process tag with an optional level+timestamp after it
	// ("(VllmWorker rank=1 pid=42) INFO 03-22 18:40:47"), or a bare level+timestamp.
	prefixRE    = regexp.MustCompile(`\(([A-Za-z_]\w*)([^()]*?)\bpid=(\d+)[^()]*\)(?:\s*(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d)?|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d`)
	rankInTagRE = regexp.MustCompile(`\brank=(\d+)`)

	weightsRE     = regexp.MustCompile(`(?:Loading model weights took|Model loading took|model weights take)\s+(` + num + `) ?(` + unit + `)`)
	kvTokensRE    = regexp.MustCompile(`GPU KV cache size: (` + num + `) tokens`)
	blocksRE      = regexp.MustCompile(`(?:^|[#\s])(?:GPU|gpu|cuda|CUDA|xpu|XPU|hpu|HPU|npu|NPU|tpu|TPU) blocks: (` + num + `)|num_gpu_blocks is: (` + num + `)`)
	blockSizeRE   = regexp.MustCompile(`\bblock_size['"]?\s*[=:]\s*(\d+)`)
	kvMemRE       = regexp.MustCompile(`Available KV cache memory: (` + num + `) ?(` + unit + `)|the rest of the memory reserved for KV Cache is (` + num + `) ?(` + unit + `)|\bkv_cache_size=(` + num + `) ?(` + unit + `)|\bavailable_kv_cache_memory\s+(` + num + `) ?(` + unit + `)`)
	graphRE       = regexp.MustCompile(`finished in (` + num + `) ?secs?,? took (` + num + `) ?(` + unit + `)`)
	graphSecRE    = regexp.MustCompile(`Graph capturing finished in (` + num + `) ?secs?`)
	graphTakesRE  = regexp.MustCompile(`CUDA graph (?:takes|took) (` + num + `) ?(` + unit + `)`)
	graphPoolRE   = regexp.MustCompile(`CUDA graph pool memory: (` + num + `) ?(` + unit + `) \(actual\)`)
	maxSeqsRE     = regexp.MustCompile(`\bmax_num_seqs['"]?\s*[=:]\s*(\d+)`)
	maxSeqLenRE   = regexp.MustCompile(`\bmax_seq_len=(\d+)`)
	maxModelLenRE = regexp.MustCompile(`\bmax_model_len['"]?\s*[=:]\s*(\d+)|Using max model len (\d+)`)
	concRE        = regexp.MustCompile(`Maximum concurrency for (` + num + `) tokens per request: (` + num + `)\s*x`)
	meanAccRE     = regexp.MustCompile(`Mean acceptance length: (` + num + `)`)
	draftedRE     = regexp.MustCompile(`Drafted: (` + num + `) tokens`)
	acceptedRE    = regexp.MustCompile(`Accepted: (` + num + `) tokens`)
	sysEffRE      = regexp.MustCompile(`System efficiency: (` + num + `)`)
	numSpecRE     = regexp.MustCompile(`Number of speculative tokens: (` + num + `)`)
	numSpecCfgRE  = regexp.MustCompile(`num_speculative_tokens['"]?\s*[=:]\s*(\d+)`)
)

var (
	tagRE      = regexp.MustCompile(`\(([A-Za-z_]\w*)([^()]*?)\bpid=(\d+)[^()]*\)`)
	levelWords = []string{"INFO ", "WARNING ", "WARN ", "ERROR ", "DEBUG ", "CRITICAL "}
)

// segments splits a line into records. Nearly every line holds at most one record; it is
// taken whole, with the rank of its process tag, without running the (costly, unanchored)
// record-start expression over the line.
func segments(line string) []core.Segment {
	levels := 0
	for _, w := range levelWords {
		levels += strings.Count(line, w)
	}
	if levels <= 1 && strings.Count(line, "pid=") <= 1 {
		rank := ""
		if strings.Contains(line, "pid=") {
			if m := tagRE.FindStringSubmatch(line); m != nil {
				rank, _ = rankKey([]string{m[0], m[1], m[2], m[3]})
			}
		}
		return []core.Segment{{Rank: rank, Text: line}}
	}
	return core.SplitSegments(line, prefixRE, rankKey, "")
}

func rankKey(m []string) (string, bool) {
	if m[1] == "" {
		return "", true
	}
	if r := rankInTagRE.FindStringSubmatch(m[2]); r != nil {
		return m[1] + " rank=" + r[1], true
	}
	if strings.Contains(m[1], "_") || m[1] == "EngineCore" || m[1] == "APIServer" {
		return m[1], true // Worker_TP1, EngineCore_DP0: the name is the rank
	}
	return m[1] + " pid=" + m[3], true
}

type state struct {
	rep          core.Report
	ar           core.AllReduceTracker
	errs         core.ErrorCollector
	weights      core.PerRank
	kvTokens     core.PerRank
	blocks       core.PerRank
	kvGiB        core.PerRank
	graphSec     core.PerRank
	graphGiB     core.PerRank
	graphSecOnly core.PerRank
	graphTakes   core.PerRank
	graphPool    core.PerRank
	conc         core.PerRank
	concLen      core.PerRank
	accept       core.Mean
	blockSize    int64
	maxSeqs      *int64
	maxSeqLen    *int64
	maxModelLen  *int64
	numSpec      int64
	accepted     float64
	drafted      float64
	v0Accept     *float64
}

// Parse reads a vLLM log (V0 or V1, any version) into a Report. See docs/logs.md for what each
// field is read from.
func Parse(r io.Reader) (*core.Report, error) {
	s := &state{}
	ad := New()
	err := core.ScanLines(r, func(n int, line string) error {
		s.errs.Line(n, line)
		if ad.ReadyLine(line) {
			s.rep.Ready = true
		}
		for _, seg := range segments(line) {
			s.record(seg.Rank, seg.Text)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("vllm log: %w", err)
	}
	return s.report(), nil
}

func numOf(v string) float64 {
	f, _ := core.ParseNum(v)
	return f
}

func gib(v, u string) float64 { return core.ToGiB(numOf(v), u) }

// match runs re on t only when t contains one of the literal keys (regexps are the parser's cost).
func match(re *regexp.Regexp, t string, keys ...string) []string {
	for _, k := range keys {
		if strings.Contains(t, k) {
			return re.FindStringSubmatch(t)
		}
	}
	return nil
}

func matchAll(re *regexp.Regexp, t string, keys ...string) [][]string {
	for _, k := range keys {
		if strings.Contains(t, k) {
			return re.FindAllStringSubmatch(t, -1)
		}
	}
	return nil
}

func firstInt(dst **int64, re *regexp.Regexp, t string, keys ...string) {
	if *dst != nil {
		return
	}
	if m := match(re, t, keys...); m != nil {
		for _, v := range m[1:] {
			if v != "" {
				*dst = core.Int(int64(numOf(v)))
				return
			}
		}
	}
}

func (s *state) record(rank, t string) {
	if strings.Contains(t, "**") {
		t = strings.ReplaceAll(t, "**", "") // markdown bold of logs pasted into issues
	}
	s.ar.Record(t)
	if m := match(weightsRE, t, "took", "take"); m != nil {
		s.weights.First(rank, gib(m[1], m[2]))
	}
	if m := match(kvTokensRE, t, "KV cache size"); m != nil {
		s.kvTokens.First(rank, numOf(m[1]))
	}
	if m := match(blocksRE, t, " blocks: ", "num_gpu_blocks"); m != nil {
		v := m[1]
		if v == "" {
			v = m[2]
		}
		s.blocks.First(rank, numOf(v))
	}
	if m := match(blockSizeRE, t, "block_size"); m != nil && s.blockSize == 0 {
		s.blockSize = int64(numOf(m[1]))
	}
	if m := match(kvMemRE, t, "KV cache memory", "KV Cache is", "kv_cache_size=", "available_kv_cache_memory"); m != nil {
		for i := 1; i+1 < len(m); i += 2 {
			if m[i] != "" {
				s.kvGiB.First(rank, gib(m[i], m[i+1]))
				break
			}
		}
	}
	for _, m := range matchAll(graphRE, t, "finished in") {
		s.graphSec.Add(rank, numOf(m[1]))
		s.graphGiB.Add(rank, gib(m[2], m[3]))
	}
	if m := match(graphSecRE, t, "Graph capturing finished"); m != nil && !graphRE.MatchString(t) {
		s.graphSecOnly.Add(rank, numOf(m[1]))
	}
	if m := match(graphTakesRE, t, "CUDA graph t"); m != nil {
		s.graphTakes.Add(rank, gib(m[1], m[2]))
	}
	if m := match(graphPoolRE, t, "CUDA graph pool memory"); m != nil {
		s.graphPool.First(rank, gib(m[1], m[2]))
	}
	firstInt(&s.maxSeqs, maxSeqsRE, t, "max_num_seqs")
	firstInt(&s.maxSeqLen, maxSeqLenRE, t, "max_seq_len=")
	firstInt(&s.maxModelLen, maxModelLenRE, t, "max_model_len", "max model len")
	if m := match(concRE, t, "Maximum concurrency"); m != nil {
		s.concLen.First(rank, numOf(m[1]))
		s.conc.First(rank, numOf(m[2]))
	}
	if m := match(numSpecCfgRE, t, "num_speculative_tokens"); m != nil && s.numSpec == 0 {
		s.numSpec = int64(numOf(m[1]))
	}
	if strings.Contains(t, "SpecDecoding metrics") || strings.Contains(t, "Speculative metrics") {
		s.spec(t)
	}
}

func (s *state) spec(t string) {
	drafted := -1.0
	if m := draftedRE.FindStringSubmatch(t); m != nil {
		drafted = numOf(m[1])
	}
	if drafted == 0 {
		return // an interval without drafts says nothing about acceptance
	}
	if m := meanAccRE.FindStringSubmatch(t); m != nil {
		s.accept.Add(numOf(m[1]), drafted)
		return
	}
	if m := sysEffRE.FindStringSubmatch(t); m != nil {
		if k := numSpecRE.FindStringSubmatch(t); k != nil {
			// V0 metrics are cumulative: the last line wins. Tokens emitted per step =
			// efficiency × (k+1).
			s.v0Accept = core.Float(numOf(m[1]) * (numOf(k[1]) + 1))
		}
		return
	}
	if m := acceptedRE.FindStringSubmatch(t); m != nil && drafted > 0 {
		s.accepted += numOf(m[1])
		s.drafted += drafted
	}
}

func (s *state) report() *core.Report {
	r := s.rep
	r.Engine = Name
	r.AllReduce, r.CustomAllReduceDisabledReason = s.ar.Result()
	r.WeightsGiB = s.weights.Min()
	r.KVCacheTokens = s.kvTokens.MinInt()
	if r.KVCacheTokens == nil && s.blocks.Len() > 0 {
		bs := s.blockSize
		if bs == 0 {
			bs = 16 // vLLM's default CUDA block size
		}
		b := s.blocks.MinInt()
		r.KVCacheTokens = core.Int(*b * bs)
	}
	r.KVCacheGiB = s.kvGiB.Min()
	switch {
	case s.graphSec.Len() > 0:
		r.CUDAGraphSeconds = s.graphSec.Max()
	case s.graphSecOnly.Len() > 0:
		r.CUDAGraphSeconds = s.graphSecOnly.Max()
	}
	switch {
	case s.graphGiB.Len() > 0:
		r.CUDAGraphGiB = s.graphGiB.Min()
	case s.graphTakes.Len() > 0:
		r.CUDAGraphGiB = s.graphTakes.Min()
	case s.graphPool.Len() > 0:
		r.CUDAGraphGiB = s.graphPool.Min()
	}
	r.MaxRunningRequests = s.maxSeqs
	switch {
	case s.concLen.Len() > 0:
		r.ContextLen = s.concLen.MinInt()
	case s.maxSeqLen != nil:
		r.ContextLen = s.maxSeqLen
	default:
		r.ContextLen = s.maxModelLen
	}
	r.MaxConcurrency = s.conc.Min()
	switch {
	case s.accept.Value() != nil:
		r.SpecAcceptLength = s.accept.Value()
	case s.v0Accept != nil:
		r.SpecAcceptLength = s.v0Accept
	case s.drafted > 0 && s.numSpec > 0:
		r.SpecAcceptLength = core.Float(1 + float64(s.numSpec)*s.accepted/s.drafted)
	}
	r.Errors = s.errs.Errors()
	return &r
}
