package spec

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// The engine section: the engine kind, its command, model and launch settings.

func (b *builder) engine(m *mapping) Engine {
	e := Engine{TPSize: 1, ReadyTimeout: Duration(DefaultReadyTimeout), StopGrace: Duration(DefaultStopGrace)}
	e.Kind, _ = m.enum("kind", false, EngineSGLang, EngineVLLM)
	if !m.has("kind") {
		m.missing("kind", "sglang or vllm")
	}
	e.Command = b.command(m, "the adapter's default")
	// engine.model may be left out when every config names its own (checked in link).
	if m.has("model") {
		e.Model, _ = m.reqStr("model", "a model path or hub id")
	} else {
		m.get("model")
	}
	b.engineMap = m
	if n, ok := m.integer("tp_size", 1); ok {
		e.TPSize = n
	}
	e.MemFractionStatic = m.numberIn("mem_fraction_static", math.SmallestNonzeroFloat64, 1, "a fraction in (0, 1]")
	e.CudaGraphMaxBS = m.intPtr("cuda_graph_max_bs", 1)
	if v := m.boolean("disable_custom_all_reduce"); v != nil {
		e.DisableCustomAllReduce = *v
	}
	e.Args = m.strList("args", true)
	b.checkArgs(m)
	e.Env = b.env(m)
	if d, ok := m.duration("ready_timeout"); ok {
		e.ReadyTimeout = d
	}
	if d, ok := m.duration("stop_grace"); ok {
		e.StopGrace = d
	}
	m.engineBounds(e.ReadyTimeout, e.StopGrace)
	if n, ok := m.get("version"); ok {
		// `version: 0.12` is a YAML number: its text is the release.
		var v string
		switch t := n.(type) {
		case *ast.StringNode, *ast.FloatNode, *ast.IntegerNode:
			v = t.GetToken().Value
		}
		if !versionPattern.MatchString(v) {
			m.bad(n, "version", "expected an engine release such as 0.12.0, 0.4.10 or 0.0.0.dev1+g5dd2c243e, got %s", describe(n))
		}
		e.Version = v
	}
	m.done()
	return e
}

// versionPattern is an engine release: major.minor[.patch] with an optional PEP 440 suffix
// (rcN, .postN, .devN, +local).
var versionPattern = regexp.MustCompile(`^v?\d+\.\d+(?:\.\d+)?(?:[.-]?(?:a|b|rc|post|dev)\d*)*(?:\+[0-9A-Za-z.]+)?$`)

// command reads a command list (engine.command, configs[].command): the program and its fixed
// arguments; left out, the command is inherited (what says from where).
func (b *builder) command(m *mapping, inherited string) []string {
	if !m.has("command") {
		m.get("command") // known, for suggestions
		return nil
	}
	cmd := m.strList("command", true)
	v, _ := m.get("command")
	if len(cmd) == 0 {
		if v != nil && !isNull(v) {
			m.bad(v, "command", "expected a non-empty list (the program and its arguments); leave command out for %s", inherited)
		}
		return nil
	}
	if strings.TrimSpace(cmd[0]) == "" {
		m.bad(v, "command", "the program (first item) must not be empty")
	}
	return cmd
}

// managedFlags are the engine flags the adapters derive from spec fields: passing them in args
// as well would make the engine and the harness disagree on what was launched.
var managedFlags = map[string]string{
	"--model-path": "use engine.model", "--model": "use engine.model",
	"--tp-size": "use tp_size", "--tp": "use tp_size", "--tensor-parallel-size": "use tp_size", "-tp": "use tp_size",
	"--host": "the harness picks host and port", "--port": "the harness picks host and port",
	"--mem-fraction-static": "use mem_fraction_static", "--gpu-memory-utilization": "use mem_fraction_static",
	"--cuda-graph-max-bs": "use cuda_graph_max_bs", "--max-cudagraph-capture-size": "use cuda_graph_max_bs",
	"--cuda-graph-max-bs-decode": "use cuda_graph_max_bs", "--cuda-graph-sizes": "use cuda_graph_max_bs",
	"--disable-custom-all-reduce": "use disable_custom_all_reduce: true",
	"--speculative-algorithm":     "use speculative", "--speculative-draft-model-path": "use speculative",
	"--speculative-eagle-topk": "use speculative", "--speculative-num-draft-tokens": "use speculative",
	"--speculative-num-steps": "use speculative", "--speculative-config": "use speculative",
}

// checkArgs rejects args that hold a flag the adapter sets itself (see managedFlags).
func (b *builder) checkArgs(m *mapping) {
	i, ok := m.index["args"]
	if !ok {
		return
	}
	seq, isSeq := b.resolve(m.entries[i].value, m.field("args")).(*ast.SequenceNode)
	if !isSeq {
		return
	}
	for j, it := range seq.Values {
		a, ok := scalarText(b.resolve(it, ""))
		if !ok {
			continue
		}
		flag, _, _ := strings.Cut(a, "=")
		if why, managed := managedFlags[flag]; managed {
			b.errorf(it, fmt.Sprintf("%s[%d]", m.field("args"), j), "%s is set by the engine adapter; %s", flag, why)
		}
	}
}
