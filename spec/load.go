package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	yaml "github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/reckon-ci/reckon/internal/metric"
	"github.com/reckon-ci/reckon/internal/num"
)

// Defaults of optional fields (docs/spec.md lists them all).
const (
	DefaultReadyTimeout   = 10 * time.Minute
	DefaultStopGrace      = 10 * time.Second
	DefaultTrials         = 5
	DefaultSeed           = 1
	DefaultRequestTimeout = 5 * time.Minute
	DefaultMaxTokens      = 32
	DefaultTopLogprobs    = 5
	DefaultProbeBatch     = 8
)

// Load reads and validates the spec file at path. On invalid input the error is an ErrorList
// holding every problem found.
func Load(path string) (*Spec, error) {
	data, err := readSpecFile(path) // limits.go: the size is checked before it is all read
	if err != nil {
		return nil, err
	}
	s, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	s.resolvePaths(path) // paths.go: data files are relative to the spec file
	return s, nil
}

// Parse validates a spec held in memory; filename is used in messages and Spec.File. On
// invalid input the error is an ErrorList holding every problem found, in file order.
func Parse(data []byte, filename string) (*Spec, error) {
	if err := checkLimits(data, filename); err != nil { // limits.go: size, depth, aliases
		return nil, coded(err, CodeLimit)
	}
	d := &decoder{file: filename}
	f, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		return nil, ErrorList{syntaxError(filename, err)}
	}
	for _, doc := range f.Docs {
		if err := checkAliasExpansion(doc, filename); err != nil {
			return nil, coded(err, CodeLimit)
		}
	}
	var bodies []ast.Node
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			bodies = append(bodies, doc.Body)
		}
	}
	switch {
	case len(bodies) == 0:
		return nil, ErrorList{{Code: CodeEmpty, File: filename, Msg: "empty spec: expected a mapping with name, engine, configs and checks"}}
	case len(bodies) > 1:
		d.errorc(CodeSyntax, bodies[1], "", "expected one YAML document, found %d (remove the extra \"---\")", len(bodies))
	}
	d.collectAnchors(bodies[0])
	b := &builder{decoder: d}
	s := b.spec(bodies[0])
	s.File = filename
	b.link(s)
	if len(d.errs) > 0 {
		return nil, d.errs.Sorted()
	}
	return s, nil
}

// syntaxError turns a YAML parser error into an Error with the parser's position.
func syntaxError(filename string, err error) *Error {
	var ye yaml.Error
	if errors.As(err, &ye) {
		e := &Error{Code: CodeSyntax, File: filename, Msg: "invalid YAML: " + ye.GetMessage()}
		if t := ye.GetToken(); t != nil && t.Position != nil {
			e.Line, e.Column = t.Position.Line, t.Position.Column
		}
		return e
	}
	return &Error{Code: CodeSyntax, File: filename, Msg: "invalid YAML: " + err.Error()}
}

// coded gives code to every problem of the ErrorList err that has none (the limits' errors).
func coded(err error, code string) error {
	var list ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			if e.Code == "" {
				e.Code = code
			}
		}
	}
	return err
}

// builder turns the syntax tree into a Spec, remembering references to resolve at the end.
type builder struct {
	*decoder
	refs      []ref
	nameNodes map[*Check]ast.Node // explicit check names, for duplicate reports
	checkNode map[*Check]ast.Node
	checkPath map[*Check]string
	// expectAt is where each config's expect.allreduce is written (for consistency errors).
	expectAt map[string]ref
	// engineMap is the engine section (engine.model is checked once the configs are read).
	engineMap *mapping
	// launchesAt is where each workload's launches is written (for checks made in link).
	launchesAt map[string]ast.Node
}

// ref is a config or workload name used by a check, resolved once the whole file is read.
type ref struct {
	node  ast.Node
	field string
	name  string
	what  string // "config" or "workload"
}

var (
	namePattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	envKeyPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// labelForbidden are the characters Ginkgo does not allow in labels.
const labelForbidden = "&|!,()/"

// nameField reads a required name used in file names (configs, workloads).
func (b *builder) nameField(m *mapping, what string) (string, ast.Node) {
	s, ok := m.reqStr("name", "a "+what+" name")
	if !ok {
		return "", nil
	}
	n := m.entries[m.index["name"]].value
	if !namePattern.MatchString(s) {
		m.bad(n, "name", "%s name %q must start with a letter or digit and hold only letters, digits, '.', '_' and '-' (it names files)", what, s)
	} else if len(s) > MaxNameLength {
		m.bad(n, "name", "%s name is %d characters, more than the %d a name may have (it names files: trials/CONFIG+WORKLOAD+N.json and its temporary file must fit a file system's 255-byte name limit)", what, len(s), MaxNameLength)
	}
	return s, n
}

func (b *builder) tags(m *mapping) []string {
	tags := m.strList("tags", false)
	for i, t := range tags {
		if strings.TrimSpace(t) == "" || strings.ContainsAny(t, labelForbidden) || strings.TrimSpace(t) != t {
			n, _ := m.get("tags")
			item := n.(*ast.SequenceNode).Values[i]
			b.errorf(item, fmt.Sprintf("%s[%d]", m.field("tags"), i), "tag %q cannot be a Ginkgo label (it must be non-empty, without surrounding spaces and without any of %s)", t, labelForbidden)
		}
	}
	return tags
}

func (b *builder) env(m *mapping) map[string]string {
	env := m.strMap("env")
	if env == nil {
		return nil
	}
	sub := b.mapping(m.entries[m.index["env"]].value, m.field("env"))
	for _, e := range sub.entries {
		if !envKeyPattern.MatchString(e.key) {
			b.errorf(e.keyN, m.field("env"), "environment variable name %q must be letters, digits and '_', not starting with a digit", e.key)
		}
	}
	return env
}

func (b *builder) spec(root ast.Node) *Spec {
	s := &Spec{}
	m := b.mapping(root, "")
	if m == nil {
		return s
	}
	m.allowExt = true
	if name, ok := m.reqStr("name", "the spec's name, used for baseline file names"); ok {
		if !namePattern.MatchString(name) {
			m.bad(m.entries[m.index["name"]].value, "name", "spec name %q must start with a letter or digit and hold only letters, digits, '.', '_' and '-' (it names baseline files)", name)
		} else if len(name) > MaxNameLength {
			m.bad(m.entries[m.index["name"]].value, "name", "spec name is %d characters, more than the %d a name may have (it names baseline files)", len(name), MaxNameLength)
		}
		s.Name = name
	}
	m.str("description")
	s.Tags = b.tags(m)
	if em := m.sub("engine"); em != nil {
		s.Engine = b.engine(em)
	} else if !m.has("engine") {
		m.missing("engine", "a mapping with kind and model")
	}
	configs, ok := m.list("configs")
	if ok && len(configs) == 0 {
		i := m.index["configs"]
		m.bad(m.entries[i].value, "configs", "expected at least one config")
	} else if !ok && !m.has("configs") {
		m.missing("configs", "a list of configs, each with a name")
	}
	seen := map[string]int{}
	for i, cn := range configs {
		path := fmt.Sprintf("configs[%d]", i)
		cm := b.mapping(cn, path)
		if cm == nil {
			continue
		}
		c, nameNode := b.config(cm)
		if c.Name != "" {
			if line, dup := seen[c.Name]; dup {
				b.errorc(CodeDuplicate, nameNode, path+".name", "duplicate config name %q (first defined at line %d)", c.Name, line)
			} else {
				seen[c.Name] = c.Line
			}
		}
		s.Configs = append(s.Configs, c)
	}
	workloads, _ := m.list("workloads")
	seenW := map[string]int{}
	for i, wn := range workloads {
		path := fmt.Sprintf("workloads[%d]", i)
		wm := b.mapping(wn, path)
		if wm == nil {
			continue
		}
		w, nameNode := b.workload(wm)
		if w.Name != "" {
			if line, dup := seenW[w.Name]; dup {
				b.errorc(CodeDuplicate, nameNode, path+".name", "duplicate workload name %q (first defined at line %d)", w.Name, line)
			} else {
				seenW[w.Name] = w.Line
			}
		}
		s.Workloads = append(s.Workloads, w)
	}
	if nm := m.sub("numerics"); nm != nil && m.has("numerics") {
		s.Numerics = b.numerics(nm)
	}
	checks, _ := m.list("checks")
	b.nameNodes = map[*Check]ast.Node{}
	b.checkNode = map[*Check]ast.Node{}
	b.checkPath = map[*Check]string{}
	for i, cn := range checks {
		path := fmt.Sprintf("checks[%d]", i)
		cm := b.mapping(cn, path)
		if cm == nil {
			continue
		}
		if c := b.check(cm, s); c != nil {
			b.checkNode[c] = cn
			b.checkPath[c] = path
			s.Checks = append(s.Checks, c)
		}
	}
	m.done()
	return s
}

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

func (b *builder) config(m *mapping) (*Config, ast.Node) {
	c := &Config{}
	c.Line, _ = position(m.node)
	var nameNode ast.Node
	c.Name, nameNode = b.nameField(m, "config")
	c.Tags = b.tags(m)
	c.Command = b.command(m, "engine.command")
	if m.has("model") {
		c.Model, _ = m.reqStr("model", "a model path or hub id; leave model out for engine.model")
	} else {
		m.get("model")
	}
	c.TPSize = m.intPtr("tp_size", 1)
	m.atMost("tp_size", MaxTPSize, "GPUs one engine can use")
	c.MemFractionStatic = m.numberIn("mem_fraction_static", math.SmallestNonzeroFloat64, 1, "a fraction in (0, 1]")
	c.CudaGraphMaxBS = m.intPtr("cuda_graph_max_bs", 1)
	c.DisableCustomAllReduce = m.boolean("disable_custom_all_reduce")
	if sm := m.sub("speculative"); sm != nil && m.has("speculative") {
		c.Speculative = b.speculative(sm)
	}
	c.Args = m.strList("args", true)
	b.checkArgs(m)
	c.Env = b.env(m)
	if xm := m.sub("expect"); xm != nil {
		c.Expect = b.expect(xm)
		if i, ok := xm.index["allreduce"]; ok && c.Name != "" {
			if b.expectAt == nil {
				b.expectAt = map[string]ref{}
			}
			b.expectAt[c.Name] = ref{node: xm.entries[i].value, field: xm.field("allreduce")}
		}
		xm.done()
	}
	m.done()
	return c, nameNode
}

// SpeculativeAlgorithms are the accepted speculative.algorithm values (case-insensitive).
var SpeculativeAlgorithms = []string{"EAGLE", "EAGLE3", "NEXTN", "MTP", "STANDALONE", "NGRAM", "MEDUSA"}

func (b *builder) speculative(m *mapping) *Speculative {
	sp := &Speculative{}
	sp.Algorithm, _ = m.enum("algorithm", true, SpeculativeAlgorithms...)
	if !m.has("algorithm") {
		m.missing("algorithm", strings.Join(SpeculativeAlgorithms, ", "))
	}
	sp.DraftModel, _ = m.str("draft_model")
	sp.NumSteps, _ = m.integer("num_steps", 1)
	sp.EagleTopK, _ = m.integer("eagle_topk", 1)
	sp.NumDraftTokens, _ = m.integer("num_draft_tokens", 1)
	m.done()
	return sp
}

// expect reads the fields of an expectation (configs[].expect or an explicit expect check).
func (b *builder) expect(m *mapping) Expect {
	var x Expect
	x.AllReduce, _ = m.enum("allreduce", false, AllReduceCustom, AllReduceNCCL)
	return x
}

func (b *builder) workload(m *mapping) (*Workload, ast.Node) {
	w := &Workload{Trials: DefaultTrials, Seed: DefaultSeed, RequestTimeout: Duration(DefaultRequestTimeout)}
	w.Line, _ = position(m.node)
	var nameNode ast.Node
	w.Name, nameNode = b.nameField(m, "workload")
	w.Tags = b.tags(m)
	w.Concurrency, _ = m.integer("concurrency", 1)
	if r := m.numberIn("request_rate", math.SmallestNonzeroFloat64, math.MaxFloat64, "a positive rate in requests/s"); r != nil {
		w.RequestRate = *r
	}
	switch {
	case m.has("concurrency") && m.has("request_rate"):
		v, _ := m.get("request_rate")
		m.badc(CodeConflict, v, "request_rate", "concurrency and request_rate exclude each other: set one (closed loop) or the other (open loop)")
	case !m.has("concurrency") && !m.has("request_rate"):
		m.missing("concurrency", "the requests in flight, or request_rate for an open loop")
	}
	if r := m.numberIn("burstiness", math.SmallestNonzeroFloat64, math.MaxFloat64, "a positive gamma shape (1 = Poisson)"); r != nil {
		w.Burstiness = *r
		if !m.has("request_rate") {
			v, _ := m.get("burstiness")
			m.badc(CodeConflict, v, "burstiness", "applies only to an open loop (set request_rate)")
		}
	} else if m.has("request_rate") {
		w.Burstiness = 1
	}
	var ok bool
	if w.NumPrompts, ok = m.integer("num_prompts", 1); !ok && !m.has("num_prompts") {
		m.missing("num_prompts", "the number of measured requests per trial")
	}
	w.Dataset, _ = m.str("dataset")
	if w.InputLen, ok = m.integer("input_len", 1); !ok && !m.has("input_len") && w.Dataset == "" {
		m.missing("input_len", "the prompt length in tokens, or a dataset")
	}
	if w.OutputLen, ok = m.integer("output_len", 1); !ok && !m.has("output_len") && w.Dataset == "" {
		m.missing("output_len", "the output length in tokens, or a dataset whose records give theirs (ShareGPT replies)")
	}
	b.workloadExtras(m, w)
	w.Warmup, _ = m.integer("warmup", 0)
	if n, ok := m.integer("trials", 1); ok {
		w.Trials = n
	}
	if n, ok := m.integer("launches", 1); ok {
		w.Launches = n
		if b.launchesAt == nil {
			b.launchesAt = map[string]ast.Node{}
		}
		v, _ := m.get("launches")
		b.launchesAt[w.Name] = v
		if n > 1 && m.has("max_trials") {
			b.errorc(CodeConflict, v, m.field("launches"), "launches %d and max_trials exclude each other: with relaunches the unit is a launch, so add launches rather than sequential trials", n)
		}
	}
	w.MaxTrials = w.Trials
	if n, ok := m.integer("max_trials", 1); ok {
		if n < w.Trials {
			v, _ := m.get("max_trials")
			m.bad(v, "max_trials", "expected at least trials (%d), got %d", w.Trials, n)
		} else {
			w.MaxTrials = n
		}
	}
	if v, ok := m.get("seed"); ok {
		if iv, isInt := v.(*ast.IntegerNode); isInt {
			switch x := iv.Value.(type) {
			case int64:
				w.Seed = x
			case uint64:
				w.Seed = int64(x)
			}
		} else {
			m.bad(v, "seed", "expected an integer, got %s", describe(v))
		}
	}
	if d, ok := m.duration("request_timeout"); ok {
		w.RequestTimeout = d
	}
	m.workloadBounds(w)
	m.done()
	return w, nameNode
}

func (b *builder) numerics(m *mapping) *Numerics {
	n := &Numerics{MaxTokens: DefaultMaxTokens, TopLogprobs: DefaultTopLogprobs, BatchSize: DefaultProbeBatch}
	n.Prompts, _ = m.reqStr("prompts", "a JSONL file of prompts")
	if v, ok := m.integer("max_tokens", 1); ok {
		n.MaxTokens = v
	}
	if v, ok := m.integer("top_logprobs", 1); ok {
		if v > 20 {
			x, _ := m.get("top_logprobs")
			m.bad(x, "top_logprobs", "expected at most 20 (the engines' limit), got %d", v)
		} else {
			n.TopLogprobs = v
		}
	}
	if v, ok := m.integer("batch_size", 0); ok {
		if v > 0 && v < 8 {
			x, _ := m.get("batch_size")
			m.bad(x, "batch_size", "expected 0 (no under-load pass) or at least 8 sequences at once, got %d (the one-at-a-time pass always runs)", v)
		} else {
			n.BatchSize = v
		}
	}
	if x, ok := m.get("prompt_logprobs"); ok {
		m.bad(x, "prompt_logprobs", "removed: every config now scores the same teacher-forced sequences (prompt and continuation), so there is nothing to switch")
	}
	m.done()
	return n
}

// floorWorkload reads a floor's workload: required (unless the spec has one workload) for a
// result metric, whose floor bounds the median over the config's trials of that workload, and
// rejected for an engine metric.
func (b *builder) floorWorkload(m *mapping, c *Check, s *Spec) {
	if c.Metric == "" {
		m.get("workload")
		return
	}
	if IsEngineMetric(c.Metric) {
		if v, ok := m.get("workload"); ok {
			m.badc(CodeConflict, v, "workload", "%s is an engine metric, read once per launch; workload applies to result metrics only", c.Metric)
		}
		return
	}
	if m.has("workload") {
		c.Workload = b.refStr(m, "workload", "workload", true)
		return
	}
	m.known = append(m.known, "workload")
	switch len(s.Workloads) {
	case 1:
		c.Workload = s.Workloads[0].Name
	case 0:
		m.missing("workload", "the workload whose trials give "+c.Metric+", and a workloads section that defines it")
	default:
		m.missing("workload", "the workload whose trials give "+c.Metric+"; required when the spec has more than one workload")
	}
}

// goodputKeys are the SLO keys of a workload's goodput section, with the metric each bounds.
var goodputKeys = map[string]string{"ttft_ms": "ttft", "tpot_ms": "tpot", "e2el_ms": "e2el"}

// workloadExtras reads the workload fields that shape each request and what is measured:
// goodput SLOs, sampling settings, the endpoint, and the configs that run the workload.
func (b *builder) workloadExtras(m *mapping, w *Workload) {
	w.IgnoreEOS = true
	if g := m.sub("goodput"); g != nil {
		w.Goodput = map[string]float64{}
		for _, key := range []string{"ttft_ms", "tpot_ms", "e2el_ms"} {
			if v := g.numberIn(key, math.SmallestNonzeroFloat64, math.MaxFloat64, "a positive number of milliseconds"); v != nil {
				w.Goodput[goodputKeys[key]] = *v
			}
		}
		if len(g.entries) == 0 {
			v, _ := m.get("goodput")
			m.bad(v, "goodput", "expected at least one SLO: ttft_ms, tpot_ms or e2el_ms")
		}
		g.what = "goodput SLOs"
		g.done()
	}
	w.Temperature = m.numberIn("temperature", 0, math.MaxFloat64, "a temperature >= 0 (0 = greedy)")
	w.TopP = m.numberIn("top_p", math.SmallestNonzeroFloat64, 1, "a probability in (0, 1]")
	if v := m.boolean("ignore_eos"); v != nil {
		w.IgnoreEOS = *v
	}
	if e, ok := m.enum("endpoint", false, EndpointCompletions, EndpointChat); ok {
		w.Endpoint = e
	}
	if m.has("configs") || m.has("config") {
		w.Configs = b.refList(m)
	} else {
		m.known = append(m.known, "config", "configs")
	}
}

// refStr reads a required config/workload name and records it for resolution.
func (b *builder) refStr(m *mapping, key, what string, required bool) string {
	s, ok := m.str(key)
	if !ok {
		if required && !m.has(key) {
			m.missing(key, "a "+what+" name")
		}
		return ""
	}
	n := m.entries[m.index[key]].value
	b.refs = append(b.refs, ref{node: n, field: m.field(key), name: s, what: what})
	return s
}

// refList reads "configs: [a, b]" (or "config: a") and records each name.
func (b *builder) refList(m *mapping) []string {
	if m.has("config") && m.has("configs") {
		v, _ := m.get("configs")
		m.badc(CodeConflict, v, "configs", "config and configs exclude each other: use configs for a list")
		return nil
	}
	if m.has("config") {
		if s := b.refStr(m, "config", "config", false); s != "" {
			m.get("configs")
			return []string{s}
		}
		m.get("configs")
		return nil
	}
	m.known = append(m.known, "config")
	names := m.strList("configs", false)
	if names == nil {
		return nil
	}
	v, _ := m.get("configs")
	seq := v.(*ast.SequenceNode)
	for i, s := range names {
		if i < len(seq.Values) {
			b.refs = append(b.refs, ref{node: seq.Values[i], field: fmt.Sprintf("%s[%d]", m.field("configs"), i), name: s, what: "config"})
		}
	}
	return names
}

func (b *builder) check(m *mapping, s *Spec) *Check {
	c := &Check{}
	c.Line, _ = position(m.node)
	kinds := make([]string, len(CheckKinds))
	for i, k := range CheckKinds {
		kinds[i] = string(k)
	}
	kind, ok := m.enum("kind", false, kinds...)
	if !ok {
		if !m.has("kind") {
			m.missing("kind", strings.Join(kinds, ", "))
		}
		return nil // without a kind no other field can be judged
	}
	c.Kind = CheckKind(kind)
	m.what = "a " + kind + " check"
	if name, ok := m.str("name"); ok {
		if strings.TrimSpace(name) == "" {
			m.bad(m.entries[m.index["name"]].value, "name", "must not be empty (leave name out for a generated one)")
		} else {
			c.Name = name
			b.nameNodes[c] = m.entries[m.index["name"]].value
		}
	}
	c.Tags = b.tags(m)
	switch c.Kind {
	case KindFloor:
		c.Configs = b.refList(m)
		c.Metric = b.metric(m, true, func(s string) bool { return IsEngineMetric(s) || IsWorkloadMetric(s) },
			"the engine report, the GPU sampler or (with a workload) reckon's workload")
		c.metricAt = fieldAt(m, "metric")
		b.floorWorkload(m, c, s)
		c.Min = m.numberIn("min", -math.MaxFloat64, math.MaxFloat64, "a number")
		c.Max = m.numberIn("max", -math.MaxFloat64, math.MaxFloat64, "a number")
		switch {
		case !m.has("min") && !m.has("max"):
			m.missing("min", "a lower bound; or max, or both")
		case c.Min != nil && c.Max != nil && *c.Min > *c.Max:
			v, _ := m.get("max")
			m.badc(CodeConflict, v, "max", "max (%s) is below min (%s)", num.Exact(*c.Max), num.Exact(*c.Min))
		}
	case KindRelative:
		c.Config = b.refStr(m, "config", "config", true)
		if of, _ := m.str("of"); of == OfBaseline {
			c.Of = OfBaseline
		} else {
			c.Of = b.refStr(m, "of", "config", true)
		}
		if c.Config != "" && c.Config == c.Of {
			v, _ := m.get("of")
			m.badc(CodeConflict, v, "of", "a config compared with itself (%q) always passes; name another config", c.Of)
		}
		c.Metric = b.metric(m, true, IsEngineMetric, "the engine report or the GPU sampler")
		c.metricAt = fieldAt(m, "metric")
		c.MinRatio = m.numberIn("min_ratio", 0, math.MaxFloat64, "a ratio >= 0")
		c.MaxRatio = m.numberIn("max_ratio", 0, math.MaxFloat64, "a ratio >= 0")
		switch {
		case !m.has("min_ratio") && !m.has("max_ratio"):
			m.missing("min_ratio", "a lower bound on the ratio; or max_ratio, or both")
		case c.MinRatio != nil && c.MaxRatio != nil && *c.MinRatio > *c.MaxRatio:
			v, _ := m.get("max_ratio")
			m.badc(CodeConflict, v, "max_ratio", "max_ratio (%s) is below min_ratio (%s)", num.Exact(*c.MaxRatio), num.Exact(*c.MinRatio))
		}
	case KindExpect:
		c.Configs = b.refList(m)
		if len(c.Configs) == 0 && !m.has("config") && !m.has("configs") {
			m.missing("configs", "the configs whose engine must show the expectation")
		}
		c.Expect = b.expect(m)
		if c.Expect.IsZero() && !m.has("allreduce") {
			m.missing("allreduce", "custom or nccl")
		}
	case KindEquivalence:
		c.Base = b.refStr(m, "base", "config", true)
		c.Head = b.refStr(m, "head", "config", true)
		if c.Base != "" && c.Base == c.Head {
			v, _ := m.get("head")
			m.badc(CodeConflict, v, "head", "a config compared with itself (%q) always passes; name another config", c.Head)
		}
		c.TopK, _ = m.integer("top_k", 1)
		if v, ok := m.get("twin"); ok {
			if sn, isStr := v.(*ast.StringNode); isStr && sn.Value == twinNone {
				c.NoTwin = true
			}
		}
		if !c.NoTwin {
			c.Twin = b.refStr(m, "twin", "config", false)
		}
		c.Oracle = b.refStr(m, "oracle", "config", false)
		for _, k := range []struct{ key, name string }{{"twin", c.Twin}, {"oracle", c.Oracle}} {
			if k.name != "" && (k.name == c.Base || k.name == c.Head) {
				v, _ := m.get(k.key)
				m.badc(CodeConflict, v, k.key, "%s %q is also the check's base or head; it must be a third config", k.key, k.name)
			}
		}
		if c.Twin != "" && c.Twin == c.Oracle {
			v, _ := m.get("oracle")
			m.badc(CodeConflict, v, "oracle", "twin and oracle are the same config %q; name one of them", c.Oracle)
		}
		if c.NoTwin && c.Oracle != "" {
			v, _ := m.get("twin")
			m.badc(CodeConflict, v, "twin", "twin: none asks for the uncalibrated bound, but an oracle is named; leave one of them out")
		}
		// Without twin or oracle reckon derives a twin (link), so only `twin: none` is uncalibrated.
		calibrated := !c.NoTwin
		c.MaxRatio = m.numberIn("max_ratio", 0, math.MaxFloat64, "a ratio > 0")
		c.BitwiseTolerance = m.numberIn("bitwise_tolerance", 0, math.MaxFloat64, "a tolerance >= 0")
		c.MaxDistance = m.numberIn("max_distance", 0, math.MaxFloat64, "a distance >= 0")
		if c.MaxRatio != nil && *c.MaxRatio == 0 {
			v, _ := m.get("max_ratio")
			m.bad(v, "max_ratio", "0 fails every candidate that differs at all; for an exact comparison set bitwise_tolerance: 0")
		}
		for _, key := range []string{"max_ratio", "bitwise_tolerance"} {
			if v, ok := m.get(key); ok && !calibrated {
				m.badc(CodeConflict, v, key, "%s needs a twin or an oracle to calibrate against (with twin: none the bound is max_distance)", key)
			}
		}
		if v, ok := m.get("max_distance"); ok && calibrated {
			m.badc(CodeConflict, v, "max_distance", "max_distance is the uncalibrated bound of `twin: none`; with a twin or oracle (derived when neither is written) the bound is max_ratio")
		}
		c.MaxAbsLogprobDelta = m.numberIn("max_abs_logprob_delta", 0, math.MaxFloat64, "a tolerance >= 0")
		c.MeanAbsLogprobDelta = m.numberIn("mean_abs_logprob_delta", 0, math.MaxFloat64, "a tolerance >= 0")
		c.MinExactMatch = m.numberIn("min_exact_match", 0, 1, "a fraction in [0, 1]")
		if c.MeanAbsLogprobDelta != nil && c.MaxAbsLogprobDelta != nil && *c.MeanAbsLogprobDelta > *c.MaxAbsLogprobDelta {
			v, _ := m.get("mean_abs_logprob_delta")
			b.errorc(CodeConflict, v, m.field("mean_abs_logprob_delta"), "mean tolerance (%s) above the max tolerance (%s) can never matter", num.Exact(*c.MeanAbsLogprobDelta), num.Exact(*c.MaxAbsLogprobDelta))
		}
		if s.Numerics == nil {
			b.errorc(CodeMissingField, m.node, m.path, "an equivalence check needs a numerics section (the prompts the probe sends)")
		}
		if c.TopK > 0 && s.Numerics != nil && c.TopK > s.Numerics.TopLogprobs {
			v, _ := m.get("top_k")
			m.bad(v, "top_k", "top_k %d is above numerics.top_logprobs (%d): the probe records too few alternatives", c.TopK, s.Numerics.TopLogprobs)
		}
	case KindAllReduceProbe:
		c.File, _ = m.reqStr("file", "the probe JSON file")
		c.Algorithms = m.strList("algorithms", false)
		c.MaxAbsErr = b.dtypeMap(m, "max_abs_err")
		c.MaxRelErr = b.dtypeMap(m, "max_rel_err")
	case KindThroughput, KindLatency:
		c.Config = b.refStr(m, "config", "config", true)
		if m.has("workload") {
			c.Workload = b.refStr(m, "workload", "workload", true)
		} else {
			m.known = append(m.known, "workload")
			switch len(s.Workloads) {
			case 1:
				c.Workload = s.Workloads[0].Name
			case 0:
				m.missing("workload", "a workload name, and a workloads section that defines it")
			default:
				m.missing("workload", "a workload name (required when the spec has more than one workload)")
			}
		}
		c.Metric = b.metric(m, true, IsResultMetric, fromWorkload)
		c.metricAt = fieldAt(m, "metric")
		c.Against = AgainstBaseline
		if a, ok := m.str("against"); ok {
			v := m.entries[m.index["against"]].value
			switch {
			case a == AgainstBaseline:
			case a == AgainstHistory:
				c.Against = AgainstHistory
			case strings.HasPrefix(a, "config:") && strings.TrimSpace(strings.TrimPrefix(a, "config:")) != "":
				c.Against = AgainstConfig
				c.AgainstConfig = strings.TrimSpace(strings.TrimPrefix(a, "config:"))
				b.refs = append(b.refs, ref{node: v, field: m.field("against"), name: c.AgainstConfig, what: "config"})
				if c.AgainstConfig == c.Config {
					m.badc(CodeConflict, v, "against", "a config compared with itself (%q) always passes; name another config", c.Config)
				}
			default:
				m.bad(v, "against", "expected baseline, history or config:NAME, got %q", a)
			}
		}
		if m.has("history_runs") {
			if n, ok := m.integer("history_runs", 2); ok {
				c.HistoryRuns = n
				if c.Against != AgainstHistory {
					m.badc(CodeConflict, m.entries[m.index["history_runs"]].value, "history_runs", "history_runs applies to against: history only (against is %s)", c.Against)
				}
			}
		} else if c.Against == AgainstHistory {
			c.HistoryRuns = DefaultHistoryRuns
		}
		c.MinEffect = DefaultMinEffect
		if v, ok := b.percent(m, "min_effect"); ok {
			c.MinEffect = v
		}
		c.Alpha = DefaultAlpha
		if v := m.numberIn("alpha", math.SmallestNonzeroFloat64, 0.5, "a significance level in (0, 0.5]"); v != nil {
			c.Alpha = *v
		}
	}
	m.done()
	return c
}

// fromWorkload names the source of a statistical check's metric.
const fromWorkload = "reckon's workload"

// metric reads a check's metric: a name of the metric registry (internal/metric) that valid
// accepts, valid being what the sources named by from (e.g. "reckon's workload") produce for this
// kind of check. Any other name is an error at the metric field that lists the metrics the check
// can gate, and for a name the registry knows, why this check could never judge it.
func (b *builder) metric(m *mapping, required bool, valid func(string) bool, from string) string {
	gateable := metricsWhere(valid)
	expected := "one of the metrics " + from + " produces: " + strings.Join(gateable, ", ")
	s, ok := m.str("metric")
	if !ok {
		if required && !m.has("metric") {
			m.missing("metric", expected)
		}
		return ""
	}
	if valid(s) {
		return s
	}
	v := m.entries[m.index["metric"]].value
	r, known := metric.Lookup(s)
	switch {
	case !known:
		m.badc(CodeUnknownMetric, v, "metric", "unknown metric %q (expected %s)", s, expected)
	case from == fromWorkload && r.Sources.Has(metric.Workload) && !r.Comparable():
		m.badc(CodeUnknownMetric, v, "metric", "%s has no better direction (a count or a setting), so %s cannot compare it; a floor can bound it (expected %s)", s, m.what, expected)
	default:
		m.badc(CodeUnmeasured, v, "metric", "%s is not produced by %s (its sources: %s), so this check could never judge it (expected %s)", s, from, r.Sources, expected)
	}
	return ""
}

// percent reads "5%" or a fraction such as 0.05.
func (b *builder) percent(m *mapping, key string) (float64, bool) {
	v, ok := m.get(key)
	if !ok {
		return 0, false
	}
	const expected = "a percentage such as 5% or a fraction in (0, 1) such as 0.05"
	var f float64
	fraction := false
	switch x := v.(type) {
	case *ast.StringNode:
		t := strings.TrimSpace(x.Value)
		switch {
		case strings.HasSuffix(t, "%"):
			pct, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
			if err != nil {
				m.bad(v, key, "expected %s, got %q", expected, x.Value)
				return 0, false
			}
			f = pct / 100
		case x.GetToken().Type == token.StringType && plainFloat.MatchString(t):
			f, _ = strconv.ParseFloat(t, 64) // a plain 1e-2
			fraction = true
		default:
			m.bad(v, key, "expected %s, got %q", expected, x.Value)
			return 0, false
		}
	case *ast.IntegerNode, *ast.FloatNode:
		f, _ = m.number(key)
		fraction = true
	default:
		m.bad(v, key, "expected %s, got %s", expected, describe(v))
		return 0, false
	}
	if fraction && f >= 1 {
		m.bad(v, key, "expected %s, got %s (write %s%% for a percentage)", expected, num.Exact(f), num.Exact(f))
		return 0, false
	}
	if f <= 0 || f >= 1 || math.IsNaN(f) {
		m.bad(v, key, "expected %s, got %s", expected, num.Exact(f))
		return 0, false
	}
	return f, true
}

// dtypeNames maps accepted dtype spellings to the probe's names.
var dtypeNames = map[string]string{
	"float32": "float32", "fp32": "float32", "f32": "float32",
	"bfloat16": "bfloat16", "bf16": "bfloat16",
	"float16": "float16", "fp16": "float16", "f16": "float16", "half": "float16",
}

func (b *builder) dtypeMap(m *mapping, key string) map[string]float64 {
	v, ok := m.get(key)
	if !ok {
		return nil
	}
	sub := b.mapping(v, m.field(key))
	if sub == nil {
		return nil
	}
	out := map[string]float64{}
	for _, e := range sub.entries {
		dt, ok := dtypeNames[strings.ToLower(e.key)]
		if !ok {
			b.errorc(CodeValue, e.keyN, sub.path, "unknown dtype %q (expected float32, bfloat16 or float16)", e.key)
			sub.known = append(sub.known, e.key)
			continue
		}
		if f := sub.numberIn(e.key, 0, math.MaxFloat64, "a tolerance >= 0"); f != nil {
			out[dt] = *f
		}
	}
	return out
}

// link resolves references, fills defaults that depend on other sections, adds the implied
// expect checks and names every check.
func (b *builder) link(s *Spec) {
	configs := map[string]bool{}
	var configNames []string
	for _, c := range s.Configs {
		if c.Name != "" && !configs[c.Name] {
			configs[c.Name] = true
			configNames = append(configNames, c.Name)
		}
	}
	workloads := map[string]bool{}
	var workloadNames []string
	for _, w := range s.Workloads {
		if w.Name != "" && !workloads[w.Name] {
			workloads[w.Name] = true
			workloadNames = append(workloadNames, w.Name)
		}
	}
	for _, r := range b.refs {
		switch r.what {
		case "config":
			if !configs[r.name] {
				b.errorc(CodeUnknownName, r.node, r.field, "names no config %q (%sconfigs: %s)", r.name, didYouMean(r.name, configNames), listOrNone(configNames))
			}
		case "workload":
			if !workloads[r.name] {
				b.errorc(CodeUnknownName, r.node, r.field, "names no workload %q (%sworkloads: %s)", r.name, didYouMean(r.name, workloadNames), listOrNone(workloadNames))
			}
		}
	}
	for _, c := range s.Checks {
		switch c.Kind {
		case KindFloor:
			if len(c.Configs) == 0 {
				c.Configs = append([]string(nil), configNames...)
			}
		case KindEquivalence:
			if s.Numerics != nil && c.TopK == 0 {
				c.TopK = s.Numerics.TopLogprobs
			}
			b.checkTwin(s, c, configs)
		case KindThroughput, KindLatency:
			b.checkPower(s, c)
		}
	}
	// Derived twins: after the floors took "every config", so that reckon's own configs get
	// only what the equivalence checks need of them.
	b.deriveTwins(s, configs)
	// Implied expect checks, unless an explicit one already says the same.
	for _, cfg := range s.Configs {
		if cfg.Expect.IsZero() || cfg.Name == "" {
			continue
		}
		covered := false
		for _, c := range s.Checks {
			if c.Kind == KindExpect && c.Expect == cfg.Expect && len(c.Configs) == 1 && c.Configs[0] == cfg.Name {
				covered = true
			}
		}
		if !covered {
			s.Checks = append(s.Checks, &Check{Kind: KindExpect, Configs: []string{cfg.Name}, Expect: cfg.Expect, Implicit: true, Line: cfg.Line})
		}
	}
	b.checkModels(s)
	b.checkConsistency(s)
	b.checkGoodput(s)
	b.nameChecks(s)
}

// checkModels requires engine.model unless every config names its own model.
func (b *builder) checkModels(s *Spec) {
	if s.Engine.Model != "" || b.engineMap == nil || b.engineMap.has("model") {
		return
	}
	for _, c := range s.Configs {
		if c.Model == "" {
			b.engineMap.missing("model", "a model path or hub id")
			return
		}
	}
}

// checkGoodput rejects a check on request_goodput (or goodput) of a workload that sets no
// goodput SLOs: the metric would never be measured.
func (b *builder) checkGoodput(s *Spec) {
	for _, c := range s.Checks {
		if c.Metric != "request_goodput" && c.Metric != "goodput" || c.Workload == "" {
			continue
		}
		w, ok := s.Workload(c.Workload)
		if !ok || len(w.Goodput) > 0 {
			continue
		}
		msg := fmt.Sprintf("%s needs goodput SLOs on workload %q (goodput: {ttft_ms: 500, tpot_ms: 50}); without them no request is judged and the metric is never measured", c.Metric, w.Name)
		if c.metricAt != nil {
			e := *c.metricAt
			e.Code, e.Msg = CodeMissingField, msg
			b.errs = append(b.errs, &e)
			continue
		}
		b.errorc(CodeMissingField, b.checkNode[c], b.checkPath[c], "%s", msg)
	}
}

// didYouMean suggests the name closest to a misspelt one ("did you mean \"nccl\"? "), or "".
func didYouMean(name string, names []string) string {
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return fmt.Sprintf("did you mean %q? ", n)
		}
	}
	if c := closest(name, names); c != "" {
		return fmt.Sprintf("did you mean %q? ", c)
	}
	return ""
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none defined"
	}
	return strings.Join(names, ", ")
}

// RankGuardAlpha is the level of the rank test (Mann-Whitney U) that the gate requires, on top
// of its t-test at alpha, before it calls a regression (gate.StatOptions.RankAlpha).
const RankGuardAlpha = 0.05

// checkPower rejects a statistical check that could never find a regression: with n trials per
// side, the smallest one-sided p-value of the rank test is 1/C(2n, n), and it must reach
// RankGuardAlpha (n >= 3).
func (b *builder) checkPower(s *Spec, c *Check) {
	var w *Workload
	for _, x := range s.Workloads {
		if x.Name == c.Workload {
			w = x
		}
	}
	if w == nil {
		return
	}
	if w.LaunchCount() > 1 {
		// Launches are the unit: one value per launch and side (a stored baseline keeps the
		// launches it was recorded with).
		if n := w.Launches; minRankP(n) > RankGuardAlpha {
			b.errorc(CodeNoPower, b.checkNode[c], b.checkPath[c], "this %s check can never find a regression: workload %q has launches: %d, and with launches as the unit the smallest p-value of the rank test is %s, above its level %s; raise launches (>= %d)",
				c.Kind, w.Name, n, num.Exact(roundSig(minRankP(n))), num.Exact(RankGuardAlpha), minTrialsFor(RankGuardAlpha))
		}
		return
	}
	n := w.MaxTrials
	if minRankP(n) > RankGuardAlpha {
		b.errorc(CodeNoPower, b.checkNode[c], b.checkPath[c], "this %s check can never find a regression: with at most %d trials per side (workload %q) the smallest p-value of the rank test is %s, above its level %s; raise trials or max_trials (>= %d)",
			c.Kind, n, w.Name, num.Exact(roundSig(minRankP(n))), num.Exact(RankGuardAlpha), minTrialsFor(RankGuardAlpha))
	}
}

// minRankP is 1/C(2n, n), the smallest one-sided p-value of an exact Mann-Whitney U test with n
// observations per side.
func minRankP(n int) float64 {
	if n <= 0 {
		return 1
	}
	c := 1.0
	for i := 1; i <= n; i++ {
		c = c * float64(n+i) / float64(i)
	}
	return 1 / c
}

func minTrialsFor(alpha float64) int {
	for n := 1; n < 64; n++ {
		if minRankP(n) <= alpha {
			return n
		}
	}
	return 64
}

func roundSig(f float64) float64 {
	if f == 0 {
		return 0
	}
	p := math.Pow(10, 3-math.Ceil(math.Log10(math.Abs(f))))
	return math.Round(f*p) / p
}

// checkConsistency finds configs whose settings contradict their expectations.
func (b *builder) checkConsistency(s *Spec) {
	for _, c := range s.Checks {
		if c.Kind != KindExpect || c.Expect.AllReduce != AllReduceCustom {
			continue
		}
		for _, name := range c.Configs {
			r, err := s.Resolved(name)
			if err != nil {
				continue
			}
			why := ""
			switch {
			case r.DisableCustomAllReduce:
				why = "disable_custom_all_reduce is true"
			case containsArg(r.Args, "--disable-custom-all-reduce"):
				why = "its args hold --disable-custom-all-reduce"
			case r.TPSize < 2:
				why = fmt.Sprintf("tp_size is %d (no allreduce runs without tensor parallelism)", r.TPSize)
			}
			if why == "" {
				continue
			}
			if c.Implicit {
				at := b.expectAt[name]
				b.errorc(CodeConflict, at.node, at.field, "config %s expects allreduce custom, but %s", name, why)
			} else {
				b.errorc(CodeConflict, b.checkNode[c], b.checkPath[c], "config %s expects allreduce custom, but %s", name, why)
			}
		}
	}
}

func containsArg(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// nameChecks gives every check without a name its generated one and rejects duplicate names.
// Generated names that collide get " #2", " #3"... in file order.
func (b *builder) nameChecks(s *Spec) {
	explicit := map[string]*Check{}
	for _, c := range s.Checks {
		if c.Name == "" {
			continue
		}
		if first, dup := explicit[c.Name]; dup {
			b.errorc(CodeDuplicate, b.nameNodes[c], b.checkPath[c]+".name", "duplicate check name %q (first used at line %d)", c.Name, first.Line)
			continue
		}
		explicit[c.Name] = c
	}
	used := map[string]bool{}
	for n := range explicit {
		used[n] = true
	}
	for _, c := range s.Checks {
		if c.Name != "" {
			continue
		}
		base := c.generatedName()
		name := base
		for i := 2; used[name]; i++ {
			name = fmt.Sprintf("%s #%d", base, i)
		}
		used[name] = true
		c.Name = name
	}
	sort.SliceStable(s.Checks, func(i, j int) bool { return !s.Checks[i].Implicit && s.Checks[j].Implicit })
}

// checkTwin rejects a twin that launches exactly like the base: NCCL is run-to-run deterministic,
// so an identical rerun measures a distance of 0 and calibrates nothing (use another summation
// order, e.g. NCCL_ALGO=Tree).
func (b *builder) checkTwin(s *Spec, c *Check, configs map[string]bool) {
	if c.Twin == "" || !configs[c.Twin] || !configs[c.Base] {
		return
	}
	tl, err1 := s.Resolved(c.Twin)
	bl, err2 := s.Resolved(c.Base)
	if err1 != nil || err2 != nil {
		return
	}
	tl.Config, bl.Config, tl.Tags, bl.Tags, tl.Expect, bl.Expect = "", "", nil, nil, Expect{}, Expect{}
	tj, _ := json.Marshal(tl)
	bj, _ := json.Marshal(bl)
	if string(tj) == string(bj) {
		for _, r := range b.refs {
			if r.name == c.Twin && strings.HasSuffix(r.field, ".twin") {
				b.errorc(CodeConflict, r.node, r.field, "twin %q launches exactly like base %q: a rerun of the same allreduce is bit-identical and calibrates nothing; give the twin another summation order (e.g. env NCCL_ALGO: Tree)", c.Twin, c.Base)
				return
			}
		}
	}
}

// fieldAt is the position of key's value in m (nil when absent), for errors found after loading.
func fieldAt(m *mapping, key string) *Error {
	i, ok := m.index[key]
	if !ok {
		return nil
	}
	line, col := position(m.entries[i].value)
	return &Error{File: m.d.file, Line: line, Column: col, Field: m.field(key)}
}
