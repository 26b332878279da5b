package spec

// Limits on a spec that are checked before the YAML parser sees it (specs arrive in pull
// requests; the parser is quadratic in nesting depth, and alias expansion is exponential).
// Every check here is one linear pass over the bytes.

import (
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/goccy/go-yaml/ast"
)

const (
	// MaxSpecBytes is the largest spec file accepted (the largest real spec is 5 KiB). The YAML
	// parser's syntax tree costs about 160 bytes of memory per byte of spec: 1 MiB keeps
	// `reckon spec check` under 200 MB.
	MaxSpecBytes = 1 << 20
	// MaxSpecNodes bounds the scalars, keys and entries of a spec (counted loosely: every word
	// outside comments and block scalars); a real spec has about a thousand. A flow list of
	// 450k one-character items (900 KB) costs the parser 370 MB.
	MaxSpecNodes = 100_000
	// MaxSpecDepth is the deepest nesting accepted: block indentation levels, "- " sequence
	// entries and flow brackets together (real specs stay under 10).
	MaxSpecDepth = 64
	// MaxSpecAliases is the most "*alias" references accepted in one spec.
	MaxSpecAliases = 1000
	// MaxSpecAliasExpansion bounds the nodes a spec would have with every alias expanded.
	MaxSpecAliasExpansion = 1 << 20
	// MaxNameLength bounds the spec's, configs' and workloads' names, which name files: the
	// longest derived name, a trial's CONFIG+WORKLOAD+NNNN.json, with the temporary suffix of an
	// atomic write (".NAME.tmp-" and 10 digits), stays under the 255-byte limit of file names.
	MaxNameLength = 100
)

// limitError is the ErrorList for a spec over a limit.
func limitError(filename string, line int, msg string, a ...any) error {
	col := 0
	if line > 0 {
		col = 1
	}
	return ErrorList{{File: filename, Line: line, Column: col, Msg: fmt.Sprintf(msg, a...)}}
}

// readSpecFile reads path, refusing (before reading it all) a file over MaxSpecBytes.
func readSpecFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSpecBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read spec %s: %w", path, err)
	}
	if len(data) > MaxSpecBytes {
		return nil, limitError(path, 0, "spec larger than %d MiB (the limit, spec.MaxSpecBytes): a spec is a few KiB; split generated configs into several specs", MaxSpecBytes>>20)
	}
	return data, nil
}

// checkLimits checks data against the size, depth and alias limits, in one pass, before
// parsing. It reads YAML loosely (quotes, comments, block scalars, flow brackets), which is
// enough to bound the work of the real parser.
func checkLimits(data []byte, filename string) error {
	if len(data) > MaxSpecBytes {
		return limitError(filename, 0, "spec larger than %d MiB (the limit, spec.MaxSpecBytes): a spec is a few KiB; split generated configs into several specs", MaxSpecBytes>>20)
	}
	s := limitScanner{filename: filename, blockScalar: -1}
	for pos := 0; pos < len(data); {
		end := pos
		for end < len(data) && data[end] != '\n' {
			end++
		}
		l := data[pos:end]
		pos = end + 1
		if err := s.scanLine(l); err != nil {
			return err
		}
	}
	return nil
}

// limitScanner is checkLimits' state between lines: the block indentation stack, the open flow
// brackets, the counts so far and the block scalar being skipped.
type limitScanner struct {
	filename    string
	indents     []int // block indentation stack
	flow        int   // open flow brackets
	aliases     int
	nodes       int
	line        int
	blockScalar int // indentation of the key owning a block scalar being skipped; -1: none
}

// scanLine checks one line (without its newline): blank lines, comments and block scalar content
// are skipped; otherwise its nesting depth and its tokens are checked.
func (s *limitScanner) scanLine(l []byte) error {
	s.line++
	ind := 0
	for ind < len(l) && l[ind] == ' ' {
		ind++
	}
	rest := l[ind:]
	if len(rest) == 0 || rest[0] == '#' || (len(rest) == 1 && rest[0] == '\r') {
		return nil
	}
	if s.blockScalar >= 0 {
		if ind > s.blockScalar {
			return nil // content of a | or > scalar
		}
		s.blockScalar = -1
	}
	depth, rest := s.depth(ind, rest)
	if depth+s.flow > MaxSpecDepth {
		return limitError(s.filename, s.line, "nesting deeper than %d levels (the limit, spec.MaxSpecDepth)", MaxSpecDepth)
	}
	return s.scanTokens(rest, depth, ind)
}

// depth is the block nesting depth of a line indented by ind whose text after the indentation is
// rest: the indentation stack (updated outside flow brackets) plus one level per leading "- ".
// It returns rest without those dashes.
func (s *limitScanner) depth(ind int, rest []byte) (int, []byte) {
	if s.flow != 0 {
		return len(s.indents), rest
	}
	for len(s.indents) > 0 && s.indents[len(s.indents)-1] >= ind {
		s.indents = s.indents[:len(s.indents)-1]
	}
	s.indents = append(s.indents, ind)
	depth := len(s.indents)
	// "- - - x": each dash opens one more level.
	for len(rest) >= 2 && rest[0] == '-' && (rest[1] == ' ' || rest[1] == '\t') {
		depth++
		rest = rest[2:]
		for len(rest) > 0 && rest[0] == ' ' {
			rest = rest[1:]
		}
	}
	return depth, rest
}

// scanTokens reads the text of a line at block depth depth (indented by ind), skipping quoted
// strings and comments: it counts nodes and aliases, tracks flow brackets and notes a block
// scalar header, and fails at the first limit exceeded.
func (s *limitScanner) scanTokens(rest []byte, depth, ind int) error {
	var quote byte
	last := byte(' ')
	for k := 0; k < len(rest); k++ {
		c := rest[k]
		if quote != 0 {
			switch {
			case quote == '"' && c == '\\':
				k++
			case c == quote:
				quote = 0
			}
			last = c
			continue
		}
		if !isSep(c) && isSep(last) {
			s.nodes++
			if s.nodes > MaxSpecNodes {
				return limitError(s.filename, s.line, "more than %d keys, values and entries (the limit, spec.MaxSpecNodes)", MaxSpecNodes)
			}
		}
		switch c {
		case '"', '\'':
			if last == ' ' || last == '[' || last == '{' || last == ',' || last == ':' || k == 0 {
				quote = c
			}
		case '#':
			if last == ' ' || last == '\t' {
				k = len(rest)
				continue
			}
		case '[', '{':
			s.flow++
			if depth+s.flow > MaxSpecDepth {
				return limitError(s.filename, s.line, "nesting deeper than %d levels (the limit, spec.MaxSpecDepth)", MaxSpecDepth)
			}
		case ']', '}':
			if s.flow > 0 {
				s.flow--
			}
		case '*':
			if last == ' ' || last == '[' || last == '{' || last == ',' || last == ':' || k == 0 {
				s.aliases++
				if s.aliases > MaxSpecAliases {
					return limitError(s.filename, s.line, "more than %d aliases (*name) (the limit, spec.MaxSpecAliases)", MaxSpecAliases)
				}
			}
		case '|', '>':
			if s.flow == 0 && (last == ' ' || k == 0) && isBlockScalarHeader(rest[k+1:]) {
				s.blockScalar = ind
				k = len(rest)
				continue
			}
		}
		last = c
	}
	return nil
}

func isSep(c byte) bool {
	switch c {
	case ' ', '\t', ',', '[', ']', '{', '}', ':', '-', '\r':
		return true
	}
	return false
}

// isBlockScalarHeader reports whether what follows "|" or ">" makes it a block scalar header
// (indentation and chomping indicators, then nothing but a comment).
func isBlockScalarHeader(b []byte) bool {
	for k, c := range b {
		switch {
		case c == '-' || c == '+' || (c >= '1' && c <= '9'):
		case c == ' ' || c == '\t' || c == '\r':
			for _, d := range b[k:] {
				if d == '#' {
					return true
				}
				if d != ' ' && d != '\t' && d != '\r' {
					return false
				}
			}
			return true
		default:
			return false
		}
	}
	return true
}

// checkAliasExpansion bounds the size of the document with every alias expanded (a "billion
// laughs" spec is small, but its expansion is not): each anchor's weight is its node count
// with the aliases inside it counted at their anchors' weights, computed once per anchor.
func checkAliasExpansion(root ast.Node, filename string) error {
	weights := map[string]int{}
	var weigh func(n ast.Node) int
	weigh = func(n ast.Node) int {
		if n == nil {
			return 0
		}
		switch v := n.(type) {
		case *ast.AliasNode:
			if v.Value != nil {
				if w, ok := weights[v.Value.GetToken().Value]; ok {
					return w
				}
			}
			return 1
		case *ast.AnchorNode:
			w := 1 + weigh(v.Value)
			if v.Name != nil {
				weights[v.Name.GetToken().Value] = w
			}
			return w
		case *ast.MappingNode:
			w := 1
			for _, mv := range v.Values {
				w += weigh(mv)
				if w > MaxSpecAliasExpansion {
					return w
				}
			}
			return w
		case *ast.MappingValueNode:
			return 1 + weigh(v.Key) + weigh(v.Value)
		case *ast.SequenceNode:
			w := 1
			for _, e := range v.Values {
				w += weigh(e)
				if w > MaxSpecAliasExpansion {
					return w
				}
			}
			return w
		case *ast.TagNode:
			return 1 + weigh(v.Value)
		case *ast.DocumentNode:
			return weigh(v.Body)
		}
		return 1
	}
	if w := weigh(root); w > MaxSpecAliasExpansion {
		return limitError(filename, 0, "with its aliases expanded the spec would have more than %d nodes (the limit, spec.MaxSpecAliasExpansion)", MaxSpecAliasExpansion)
	}
	return nil
}

// Value domains of a spec's numbers: each bounded by what a real run can use, so that a typo
// (input_len: 1000000000) is a spec error at its line rather than a gate that allocates 144 GB
// and writes no report.
const (
	// MaxSequenceTokens bounds input_len + output_len (the longest context of any served model
	// is 1M tokens).
	MaxSequenceTokens = 1 << 20
	// MaxWorkloadTokens bounds num_prompts x (input_len + output_len): the token ids of a
	// trial's prompts are generated in memory (8 bytes each: 512 MiB).
	MaxWorkloadTokens = 1 << 26
	// MaxNumPrompts bounds num_prompts and warmup.
	MaxNumPrompts = 1_000_000
	// MaxConcurrency bounds concurrency (requests in flight).
	MaxConcurrency = 100_000
	// MaxTrials bounds trials and max_trials per workload and launch.
	MaxTrials = 1000
	// MaxLaunches bounds launches per workload.
	MaxLaunches = 100
	// MaxTPSize bounds tp_size (GPUs of one engine).
	MaxTPSize = 64
	// MaxStopGrace bounds stop_grace; MaxTimeout bounds ready_timeout and request_timeout.
	MaxStopGrace = 10 * time.Minute
	MaxTimeout   = 24 * time.Hour
)

// atMost reports an integer field above max at its line; why says what the bound protects.
func (m *mapping) atMost(key string, max int64, why string) {
	v, ok := m.get(key)
	if !ok {
		return
	}
	iv, isInt := v.(*ast.IntegerNode)
	if !isInt {
		return // reported where the field is read
	}
	var n int64
	switch x := iv.Value.(type) {
	case int64:
		n = x
	case uint64:
		n = math.MaxInt64
		if x < math.MaxInt64 {
			n = int64(x)
		}
	}
	if n > max && n <= math.MaxInt32 { // larger: reported as too large where it is read
		m.bad(v, key, "%d is more than %d, the most %s", n, max, why)
	}
}

// durationAtMost reports a duration field above max at its line.
func (m *mapping) durationAtMost(key string, d Duration, max time.Duration, why string) {
	if v, ok := m.get(key); ok && time.Duration(d) > max {
		m.bad(v, key, "%s is more than %s, the most %s", time.Duration(d), max, why)
	}
}

// engineBounds checks the engine's (or a config's) numbers against their domains.
func (m *mapping) engineBounds(readyTimeout, stopGrace Duration) {
	m.atMost("tp_size", MaxTPSize, "GPUs one engine can use")
	m.durationAtMost("ready_timeout", readyTimeout, MaxTimeout, "reckon waits for an engine")
	m.durationAtMost("stop_grace", stopGrace, MaxStopGrace, "reckon waits for an engine to stop")
}

// workloadBounds checks a workload's numbers against their domains.
func (m *mapping) workloadBounds(w *Workload) {
	m.atMost("num_prompts", MaxNumPrompts, "requests of one trial")
	m.atMost("warmup", MaxNumPrompts, "warmup requests")
	m.atMost("concurrency", MaxConcurrency, "requests in flight")
	m.atMost("input_len", MaxSequenceTokens, "tokens of a sequence")
	m.atMost("output_len", MaxSequenceTokens, "tokens of a sequence")
	m.atMost("trials", MaxTrials, "trials of a workload")
	m.atMost("max_trials", MaxTrials, "trials of a workload")
	m.atMost("launches", MaxLaunches, "launches of a config")
	m.durationAtMost("request_timeout", w.RequestTimeout, MaxTimeout, "one request may take")
	seq := int64(w.InputLen) + int64(w.OutputLen)
	if w.InputLen <= MaxSequenceTokens && w.OutputLen <= MaxSequenceTokens && seq > MaxSequenceTokens {
		v, _ := m.get("output_len")
		m.bad(v, "output_len", "input_len + output_len is %d tokens, more than %d, the most tokens of a sequence", seq, MaxSequenceTokens)
	} else if total := int64(w.NumPrompts) * seq; w.NumPrompts <= MaxNumPrompts && seq <= MaxSequenceTokens && total > MaxWorkloadTokens {
		v, _ := m.get("num_prompts")
		m.bad(v, "num_prompts", "num_prompts x (input_len + output_len) is %d tokens, more than %d, the most one trial may generate in memory", total, MaxWorkloadTokens)
	}
}
