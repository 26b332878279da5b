package spec

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"

	yaml "github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
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
	s.ResolvePaths(path) // paths.go: data files are relative to the spec file
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
	x.AllReduce, _ = m.enum("allreduce", false, AllReduceCustom, AllReduceNCCL, AllReduceFused)
	return x
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

// check reads one check: the fields every check has, then its kind's parameters through the
// kind's decoder (the registry in check.go).
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
	def, _ := kindDefOf(c.Kind) // m.enum accepted only registered kinds
	c.Params = def.decode(b, m, s)
	m.done()
	return c
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
	l := &linker{builder: b, s: s, configs: configs, configNames: configNames}
	for _, c := range s.Checks {
		c.Params.link(l, c)
	}
	// Derived twins: after the floors took "every config", so that reckon's own configs get
	// only what the equivalence checks need of them.
	b.deriveTwins(s, configs)
	impliedExpects(s)
	b.checkModels(s)
	for _, c := range s.Checks {
		c.Params.validate(l, c)
	}
	b.nameChecks(s)
}

// linker is the state of link that the kinds' link and validate steps read: the builder (for
// errors and the positions of checks), the spec, and its config names.
type linker struct {
	*builder
	s           *Spec
	configs     map[string]bool
	configNames []string // in file order, without duplicates
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

// fieldAt is the position of key's value in m (nil when absent), for errors found after loading.
func fieldAt(m *mapping, key string) *Error {
	i, ok := m.index[key]
	if !ok {
		return nil
	}
	line, col := position(m.entries[i].value)
	return &Error{File: m.d.file, Line: line, Column: col, Field: m.field(key)}
}
