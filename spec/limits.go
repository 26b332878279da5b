package spec

// Limits on a spec that are checked before the YAML parser sees it (specs arrive in pull
// requests; the parser is quadratic in nesting depth, and alias expansion is exponential).
// Every check here is one linear pass over the bytes.

import (
	"fmt"
	"io"
	"os"

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
	var (
		indents     []int // block indentation stack
		flow        int   // open flow brackets
		aliases     int
		nodes       int
		line        = 0
		blockScalar = -1 // indentation of the key owning a block scalar being skipped; -1: none
	)
	for pos := 0; pos < len(data); {
		end := pos
		for end < len(data) && data[end] != '\n' {
			end++
		}
		l := data[pos:end]
		pos = end + 1
		line++
		ind := 0
		for ind < len(l) && l[ind] == ' ' {
			ind++
		}
		rest := l[ind:]
		if len(rest) == 0 || rest[0] == '#' || (len(rest) == 1 && rest[0] == '\r') {
			continue
		}
		if blockScalar >= 0 {
			if ind > blockScalar {
				continue // content of a | or > scalar
			}
			blockScalar = -1
		}
		depth := 0
		if flow == 0 {
			for len(indents) > 0 && indents[len(indents)-1] >= ind {
				indents = indents[:len(indents)-1]
			}
			indents = append(indents, ind)
			depth = len(indents)
			// "- - - x": each dash opens one more level.
			for len(rest) >= 2 && rest[0] == '-' && (rest[1] == ' ' || rest[1] == '\t') {
				depth++
				rest = rest[2:]
				for len(rest) > 0 && rest[0] == ' ' {
					rest = rest[1:]
				}
			}
		} else {
			depth = len(indents)
		}
		if depth+flow > MaxSpecDepth {
			return limitError(filename, line, "nesting deeper than %d levels (the limit, spec.MaxSpecDepth)", MaxSpecDepth)
		}
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
				nodes++
				if nodes > MaxSpecNodes {
					return limitError(filename, line, "more than %d keys, values and entries (the limit, spec.MaxSpecNodes)", MaxSpecNodes)
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
				flow++
				if depth+flow > MaxSpecDepth {
					return limitError(filename, line, "nesting deeper than %d levels (the limit, spec.MaxSpecDepth)", MaxSpecDepth)
				}
			case ']', '}':
				if flow > 0 {
					flow--
				}
			case '*':
				if last == ' ' || last == '[' || last == '{' || last == ',' || last == ':' || k == 0 {
					aliases++
					if aliases > MaxSpecAliases {
						return limitError(filename, line, "more than %d aliases (*name) (the limit, spec.MaxSpecAliases)", MaxSpecAliases)
					}
				}
			case '|', '>':
				if flow == 0 && (last == ' ' || k == 0) && isBlockScalarHeader(rest[k+1:]) {
					blockScalar = ind
					k = len(rest)
					continue
				}
			}
			last = c
		}
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
