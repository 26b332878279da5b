package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"strings"

	"github.com/reckon-ci/reckon/internal/strictjson"
)

// This file is the strict reader of the op-level allreduce probe (docs/allreduce-probe.md). A probe
// file is produced on a GPU machine by a script, often by a different version of it than the one
// that reads it, so every departure from the contract is an error naming the file, the line and
// column, the JSON path (results[3].algorithms[1].max_rel_err) and what was expected: an unknown or
// misspelt field, a missing required field (a missing max_rel_err must not read as 0 and pass), a
// value of the wrong type, null, NaN or Infinity (which Python's json writes by default), a
// duplicated field, trailing data, and every rule of the contract that Validate checks. The walk
// against the Go types is internal/strictjson's; the contract's own messages and rules are here.

// maxProbeProblems bounds how many problems a ProbeError keeps; the rest are counted.
// maxProbeProblemLines bounds how many distinct problems its message lists.
const (
	maxProbeProblems     = 1000
	maxProbeProblemLines = 25
)

// allReduceDTypeSize maps the contract's dtype names to their element size in bytes.
var allReduceDTypeSize = map[string]int64{"float32": 4, "bfloat16": 2, "float16": 2}

// ProbeProblem is one way a probe document breaks its contract.
type ProbeProblem struct {
	// Path is the JSON path of the offending value, e.g. "results[3].algorithms[1].max_rel_err";
	// "" for the document itself.
	Path string
	// Line and Column locate the value in the file (1-based); 0 when unknown, e.g. when a
	// struct built in memory was validated.
	Line, Column int
	// Msg says what is wrong and what was expected. It starts with the path.
	Msg string
}

// String renders the problem as "line L col C: MSG", or MSG when its position is unknown.
func (p ProbeProblem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("line %d col %d: %s", p.Line, p.Column, p.Msg)
	}
	return p.Msg
}

// ProbeError lists every problem found in a probe document. Decode, Read and Validate return it;
// callers that want the individual problems use errors.As.
type ProbeError struct {
	// File is the file the document was read from; "" when it came from a reader or from memory.
	File string
	// Schema is the version of the contract the document was checked against (its own schema
	// when that is one reckon reads; "" for the current one).
	Schema string
	// Decoding is true when the document could not be decoded (bad JSON, unknown field, wrong
	// type, missing field); false when it decoded but breaks a rule of the contract.
	Decoding bool
	// Problems found, in document order (at most maxProbeProblems of them).
	Problems []ProbeProblem
	// More counts the problems found beyond those listed.
	More int
}

// Error renders the file, the stage (decoding or the contract's rules) and the problems, one per
// line when there are several; a problem repeated across cases is listed once, with its count.
func (e *ProbeError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	if e.Decoding {
		b.WriteString("decoding allreduce probe")
	} else {
		schema := e.Schema
		if schema == "" {
			schema = AllReduceProbeSchema
		}
		b.WriteString("allreduce probe does not follow " + schema + " (docs/allreduce-probe.md)")
	}
	if len(e.Problems) == 1 && e.More == 0 {
		b.WriteString(": " + e.Problems[0].String())
		return b.String()
	}
	fmt.Fprintf(&b, ": %d problems:", len(e.Problems)+e.More)
	// A writer that misspells a field does so in every case: list each kind of problem once,
	// at its first place, with the count of the others.
	var order []string
	first := map[string]ProbeProblem{}
	count := map[string]int{}
	for _, p := range e.Problems {
		k := indexPattern.ReplaceAllString(p.Msg, "[]")
		if count[k] == 0 {
			order = append(order, k)
			first[k] = p
		}
		count[k]++
	}
	for i, k := range order {
		if i == maxProbeProblemLines {
			fmt.Fprintf(&b, "\n  - ... and %d more kinds of problem", len(order)-i)
			break
		}
		b.WriteString("\n  - " + first[k].String())
		if n := count[k] - 1; n > 0 {
			fmt.Fprintf(&b, " (and the same in %d more places)", n)
		}
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "\n  - ... and %d more problems not examined", e.More)
	}
	return b.String()
}

// indexPattern matches the array indices of a JSON path, e.g. the [3] of results[3].
var indexPattern = regexp.MustCompile(`\[\d+\]`)

func (e *ProbeError) add(p ProbeProblem) {
	if len(e.Problems) >= maxProbeProblems {
		e.More++
		return
	}
	e.Problems = append(e.Problems, p)
}

// ReadAllReduceProbe reads the allreduce probe file at path strictly (DecodeAllReduceProbe) and
// validates it. A malformed or invalid file gives a *ProbeError naming path.
func ReadAllReduceProbe(path string) (*AllReduceProbe, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading allreduce probe: %w", err)
	}
	p, err := decodeAllReduceProbe(data)
	if err != nil {
		var pe *ProbeError
		if errors.As(err, &pe) {
			pe.File = path
			return nil, pe
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// DecodeAllReduceProbe decodes one reckon.allreduce-probe/v2 (or v1) JSON document strictly and
// validates it (Validate). Unknown, duplicated, missing, null or mistyped fields, NaN or Infinity,
// and trailing data are errors; problems are reported as a *ProbeError with line, column and JSON
// path.
func DecodeAllReduceProbe(r io.Reader) (*AllReduceProbe, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading allreduce probe: %w", err)
	}
	return decodeAllReduceProbe(data)
}

func decodeAllReduceProbe(data []byte) (*AllReduceProbe, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
	errs := &ProbeError{Decoding: true}
	doc := strictjson.Check(data, reflect.TypeFor[AllReduceProbe](), strictjson.Options{
		Expected:  "a JSON object with \"schema\": \"" + AllReduceProbeSchema + "\"",
		Document:  "the probe's JSON object",
		NonFinite: "write a non-finite error as a large finite number such as 1e300, so that the check fails the algorithm instead of rejecting the file",
		Optional:  optionalWhen,
		Report: func(p strictjson.Problem) {
			errs.add(ProbeProblem{Path: p.Path, Line: p.Line, Column: p.Column, Msg: p.Msg})
		},
	})
	if len(errs.Problems) > 0 {
		explainSchema(data, doc, errs)
		return nil, errs
	}
	var p AllReduceProbe
	if err := json.Unmarshal(data, &p); err != nil {
		// The walk accepted the document, so this is not expected; report it plainly.
		return nil, &ProbeError{Decoding: true, Problems: []ProbeProblem{{Msg: "not decodable: " + err.Error()}}}
	}
	if err := p.Validate(); err != nil {
		var pe *ProbeError
		if errors.As(err, &pe) {
			for i := range pe.Problems {
				pe.Problems[i].Line, pe.Problems[i].Column = doc.Locate(pe.Problems[i].Path)
			}
		}
		return nil, err
	}
	return &p, nil
}

// Validate checks p against its version of the contract (docs/allreduce-probe.md): the schema
// (v2, or the older v1), a source, at least 2 ranks, a reference algorithm present in every case,
// sizes that match their dtype, known dtypes and input kinds, unique algorithm names, finite
// non-negative errors and timings, no exact:false with a zero error, and pairs that compare two
// different algorithms of their case that ran, at most once each, with identical:true only for a
// zero difference. A v2 document must also carry its calibration (the oracle, a known role for
// every algorithm, the reference among them, positive controls that name a candidate), a call
// pattern per case, the oracle metrics (nrmse, max_ulp) of every algorithm that ran, and the
// engagement counter of every candidate and positive control; a v1 document must carry none of
// these. It returns a *ProbeError listing every problem, each naming its JSON path.
func (p *AllReduceProbe) Validate() error {
	e := &ProbeError{}
	bad := func(path, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if path != "" {
			msg = path + ": " + msg
		}
		e.add(ProbeProblem{Path: path, Msg: msg})
	}
	if p == nil {
		bad("", "no probe (nil)")
		return e
	}
	v2 := p.Schema == AllReduceProbeSchema
	switch p.Schema {
	case AllReduceProbeSchema, AllReduceProbeSchemaV1:
		e.Schema = p.Schema
	default:
		bad("schema", "%q, expected %q (or the older %q)", p.Schema, AllReduceProbeSchema, AllReduceProbeSchemaV1)
	}
	if strings.TrimSpace(p.Source) == "" {
		bad("source", "missing, expected who measured (e.g. %q or %q)", "refengine", "torch.distributed")
	}
	if p.WorldSize < 2 {
		bad("world_size", "%d, expected the number of ranks, at least 2", p.WorldSize)
	}
	if strings.TrimSpace(p.Reference) == "" {
		bad("reference", "missing, expected the name of the algorithm the others are judged against (e.g. %q)", "nccl")
	}
	if len(p.Results) == 0 {
		bad("results", "empty, expected at least one (size, dtype, inputs) case")
	}
	roles := map[string]AllReduceProbeRole{}
	if v2 {
		roles = validateCalibration(p, bad)
	} else if p.Calibration != nil {
		bad("calibration", "present in a %s document, expected it only with \"schema\": %q (v1 has no oracle or controls)", AllReduceProbeSchemaV1, AllReduceProbeSchema)
	}
	ranAnywhere := map[string]bool{}
	for i, c := range p.Results {
		at := fmt.Sprintf("results[%d]", i)
		validateProbeCaseShape(c, at, v2, bad)
		names, ran := validateProbeAlgorithms(c, at, v2, roles, ranAnywhere, bad)
		if p.Reference != "" && !names[p.Reference] {
			bad(at+".algorithms", "the reference algorithm %q is not among this case's algorithms, expected every case to run it", p.Reference)
		}
		validateProbePairs(c, at, names, ran, bad)
	}
	if v2 && p.Calibration != nil {
		for k, r := range p.Calibration.Roles {
			if r.Algorithm != "" && !ranAnywhere[r.Algorithm] && len(p.Results) > 0 {
				bad(fmt.Sprintf("calibration.roles[%d].algorithm", k), "%q ran in no case (absent or skipped everywhere), expected every listed algorithm to run somewhere", r.Algorithm)
			}
		}
	}
	if len(e.Problems) > 0 {
		return e
	}
	return nil
}

// validateProbeCaseShape checks case c (at path at) apart from its algorithms and pairs: a known
// dtype with a matching size, a known input kind, and the call pattern that v2 requires and v1
// forbids.
func validateProbeCaseShape(c AllReduceProbeCase, at string, v2 bool, bad func(string, string, ...any)) {
	if size, ok := allReduceDTypeSize[c.DType]; !ok {
		bad(at+".dtype", "%q, expected float32, bfloat16 or float16", c.DType)
	} else if c.SizeBytes <= 0 || c.Elements <= 0 || c.Elements > c.SizeBytes || c.Elements*size != c.SizeBytes {
		bad(at, "size_bytes %d and elements %d do not match %s (expected size_bytes = elements x %d bytes, both positive)",
			c.SizeBytes, c.Elements, c.DType, size)
	}
	switch {
	case c.Inputs == "random" || c.Inputs == "integer":
	case v2 && (c.Inputs == "wide" || c.Inputs == "order_sensitive"):
	case v2:
		bad(at+".inputs", "%q, expected random, wide, order_sensitive or integer", c.Inputs)
	default:
		bad(at+".inputs", "%q, expected random or integer", c.Inputs)
	}
	if v2 {
		validatePattern(c, at, bad)
	} else if c.Mode != "" || c.Calls != 0 || c.CallsPerSync != 0 {
		bad(at, "mode, calls or calls_per_sync in a %s document, expected them only with \"schema\": %q", AllReduceProbeSchemaV1, AllReduceProbeSchema)
	}
}

// validateProbeAlgorithms checks the algorithms of case c (at path at): unique names with a role
// (v2), and for each that ran finite errors and timings, a consistent exact flag and the oracle
// metrics v2 requires and v1 forbids. It returns the names in the case and those that ran, and
// adds the latter to ranAnywhere.
func validateProbeAlgorithms(c AllReduceProbeCase, at string, v2 bool, roles map[string]AllReduceProbeRole, ranAnywhere map[string]bool, bad func(string, string, ...any)) (names, ran map[string]bool) {
	if len(c.Algorithms) == 0 {
		bad(at+".algorithms", "empty, expected at least the reference algorithm")
	}
	ran = map[string]bool{}
	names = map[string]bool{}
	for j, a := range c.Algorithms {
		aat := fmt.Sprintf("%s.algorithms[%d]", at, j)
		if strings.TrimSpace(a.Name) == "" {
			bad(aat+".name", "missing, expected the algorithm's name (e.g. %q)", "nccl")
		} else if names[a.Name] {
			bad(aat+".name", "%q appears twice in this case, expected unique names", a.Name)
		}
		names[a.Name] = true
		role, hasRole := roles[a.Name]
		if v2 && a.Name != "" && !hasRole {
			bad(aat+".name", "%q has no role in calibration.roles, expected every algorithm to be listed there", a.Name)
		}
		if a.Skipped != "" {
			continue
		}
		ran[a.Name] = true
		ranAnywhere[a.Name] = true
		checkProbeMetric(bad, aat+".max_abs_err", a.MaxAbsErr)
		checkProbeMetric(bad, aat+".max_rel_err", a.MaxRelErr)
		if a.MedianUs != nil {
			checkProbeMetric(bad, aat+".median_us", *a.MedianUs)
		}
		if !a.Exact && a.MaxAbsErr == 0 {
			bad(aat, "exact is false but max_abs_err is 0, a contradiction (an output equal to the float64 reference is exact)")
		}
		if v2 {
			validateOracleMetrics(a, role, hasRole, c.Calls, aat, bad)
		} else if a.NRMSE != nil || a.MaxULP != nil || a.EngagedCalls != nil || a.FaultedCalls != nil {
			bad(aat, "nrmse, max_ulp, engaged_calls or faulted_calls in a %s document, expected them only with \"schema\": %q", AllReduceProbeSchemaV1, AllReduceProbeSchema)
		}
	}
	return names, ran
}

// validateProbePairs checks the pairs of case c (at path at): two different algorithms of the
// case (names) that both ran, each pair at most once, finite differences, and identical:true
// only for a zero difference.
func validateProbePairs(c AllReduceProbeCase, at string, names, ran map[string]bool, bad func(string, string, ...any)) {
	seen := map[[2]string]int{}
	for j, pr := range c.Pairs {
		pat := fmt.Sprintf("%s.pairs[%d]", at, j)
		switch {
		case !names[pr.A] || !names[pr.B] || pr.A == pr.B:
			bad(pat, "a=%q b=%q, expected two different algorithms of this case", pr.A, pr.B)
		case !ran[pr.A] || !ran[pr.B]:
			bad(pat, "a=%q b=%q compares an algorithm that was skipped in this case, expected only algorithms that ran", pr.A, pr.B)
		}
		key := [2]string{min(pr.A, pr.B), max(pr.A, pr.B)}
		if k, dup := seen[key]; dup {
			bad(pat, "%s and %s were already compared in pairs[%d], expected each pair at most once", pr.A, pr.B, k)
		} else {
			seen[key] = j
		}
		checkProbeMetric(bad, pat+".max_abs_diff", pr.MaxAbsDiff)
		checkProbeMetric(bad, pat+".max_rel_diff", pr.MaxRelDiff)
		if pr.Identical && pr.MaxAbsDiff != 0 {
			bad(pat, "identical is true but max_abs_diff is %g, a contradiction", pr.MaxAbsDiff)
		}
	}
}

// probeModes are the call patterns of a v2 case.
var probeModes = map[string]bool{"eager": true, "queued": true, "cuda_graph": true}

// probeRoles are the roles of a v2 calibration.
var probeRoles = map[string]bool{RoleReference: true, RoleTwin: true, RoleCandidate: true, RolePositiveControl: true}

// validateCalibration checks the calibration block of a v2 probe and returns the roles by
// algorithm name.
func validateCalibration(p *AllReduceProbe, bad func(string, string, ...any)) map[string]AllReduceProbeRole {
	roles := map[string]AllReduceProbeRole{}
	cal := p.Calibration
	if cal == nil {
		bad("calibration", "missing, expected the oracle and the role of every algorithm (schema %s; write %q for an uncalibrated probe)", AllReduceProbeSchema, AllReduceProbeSchemaV1)
		return roles
	}
	if strings.TrimSpace(cal.Oracle) == "" {
		bad("calibration.oracle", "missing, expected what the oracle is (e.g. %q)", "all_gather, float32 sum in rank order, one rounding")
	}
	if len(cal.Roles) == 0 {
		bad("calibration.roles", "empty, expected the role of every algorithm (reference, twin, candidate, positive_control)")
	}
	for k, r := range cal.Roles {
		at := fmt.Sprintf("calibration.roles[%d]", k)
		switch {
		case strings.TrimSpace(r.Algorithm) == "":
			bad(at+".algorithm", "missing, expected an algorithm name of the results")
		case roles[r.Algorithm].Algorithm != "":
			bad(at+".algorithm", "%q is listed twice, expected one role per algorithm", r.Algorithm)
		}
		if !probeRoles[r.Role] {
			bad(at+".role", "%q, expected reference, twin, candidate or positive_control", r.Role)
		}
		if r.AboveBytes < 0 || r.MaxBytes < 0 {
			bad(at, "above_bytes %d, max_bytes %d: expected sizes >= 0", r.AboveBytes, r.MaxBytes)
		}
		if r.Role == RoleReference && r.Algorithm != p.Reference {
			bad(at, "%q has role reference but the probe's reference is %q, expected the reference role on %q only", r.Algorithm, p.Reference, p.Reference)
		}
		if r.Role != RolePositiveControl && (r.Of != "" || r.Fault != "") {
			bad(at, "of/fault set on a %s, expected them only on a positive_control", r.Role)
		}
		if r.Role != RoleCandidate && r.MaxBytes != 0 {
			bad(at+".max_bytes", "set on a %s, expected it only on a candidate", r.Role)
		}
		if r.Algorithm != "" {
			roles[r.Algorithm] = r
		}
	}
	if p.Reference != "" && len(cal.Roles) > 0 && roles[p.Reference].Role != RoleReference {
		bad("calibration.roles", "the reference %q has no role reference, expected it listed with \"role\": %q", p.Reference, RoleReference)
	}
	for k, r := range cal.Roles {
		if r.Role != RolePositiveControl {
			continue
		}
		at := fmt.Sprintf("calibration.roles[%d]", k)
		if roles[r.Of].Role != RoleCandidate {
			bad(at+".of", "%q, expected the candidate this control's fault was injected around", r.Of)
		}
		if strings.TrimSpace(r.Fault) == "" {
			bad(at+".fault", "missing, expected the injected fault (scale, drop_peer, stale, ...)")
		}
	}
	return roles
}

// validatePattern checks a v2 case's call pattern.
func validatePattern(c AllReduceProbeCase, at string, bad func(string, string, ...any)) {
	if !probeModes[c.Mode] {
		bad(at+".mode", "%q, expected eager, queued or cuda_graph", c.Mode)
	}
	if c.Calls < 1 || c.CallsPerSync < 1 || c.Calls%c.CallsPerSync != 0 {
		bad(at, "calls %d, calls_per_sync %d: expected both at least 1, calls a multiple of calls_per_sync", c.Calls, c.CallsPerSync)
	}
	if c.Mode == "eager" && c.CallsPerSync != 1 {
		bad(at+".calls_per_sync", "%d in eager mode, expected 1 (a sync after every call)", c.CallsPerSync)
	}
}

// validateOracleMetrics checks the v2 metrics of an algorithm that ran.
func validateOracleMetrics(a AllReduceProbeAlgorithm, role AllReduceProbeRole, hasRole bool, calls int64, aat string, bad func(string, string, ...any)) {
	if a.NRMSE == nil {
		bad(aat+".nrmse", "missing, expected the NRMSE against the oracle (v2)")
	} else {
		checkProbeMetric(bad, aat+".nrmse", *a.NRMSE)
	}
	if a.MaxULP == nil {
		bad(aat+".max_ulp", "missing, expected the largest ULP distance to the oracle (v2)")
	} else {
		checkProbeMetric(bad, aat+".max_ulp", *a.MaxULP)
	}
	if !hasRole {
		return
	}
	counter := func(field string, v *int64, why string) {
		switch {
		case v == nil:
			bad(aat+"."+field, "missing on a %s, expected %s", role.Role, why)
		case *v < 0 || (calls > 0 && *v > calls):
			bad(aat+"."+field, "%d, expected between 0 and the case's %d calls", *v, calls)
		}
	}
	if role.Role == RoleCandidate || role.Role == RolePositiveControl {
		counter("engaged_calls", a.EngagedCalls, "how many calls took the custom path (its call counter or the backend's report)")
	}
	if role.Role == RolePositiveControl {
		counter("faulted_calls", a.FaultedCalls, "how many calls the injected fault altered")
	}
}

func checkProbeMetric(bad func(string, string, ...any), at string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		bad(at, "%v, expected a finite non-negative number", v)
	}
}

// explainSchema puts first, when the document names another schema, that it is not (this version
// of) an allreduce probe: the other problems then follow from that.
func explainSchema(data []byte, doc *strictjson.Doc, errs *ProbeError) {
	var head struct {
		Schema any `json:"schema"`
	}
	if json.Unmarshal(data, &head) != nil {
		return
	}
	s, ok := head.Schema.(string)
	if !ok || s == AllReduceProbeSchema || s == AllReduceProbeSchemaV1 {
		return
	}
	line, col := doc.Locate("schema")
	p := ProbeProblem{Path: "schema", Line: line, Column: col,
		Msg: fmt.Sprintf("field \"schema\": %q, expected %q (or the older %q): this is not an allreduce probe file, or not a version this reckon reads", s, AllReduceProbeSchema, AllReduceProbeSchemaV1)}
	errs.Problems = append([]ProbeProblem{p}, errs.Problems...)
	if len(errs.Problems) > maxProbeProblems {
		errs.Problems = errs.Problems[:maxProbeProblems]
		errs.More++
	}
}

// optionalWhen relaxes the tags' notion of required where the contract does: a skipped
// algorithm's metrics are meaningless, and a case may carry no pairs (a single algorithm).
func optionalWhen(t reflect.Type, name string, present map[string]bool) bool {
	switch t {
	case reflect.TypeFor[AllReduceProbeAlgorithm]():
		return name != "name" && present["skipped"]
	case reflect.TypeFor[AllReduceProbeCase]():
		return name == "pairs"
	}
	return false
}
