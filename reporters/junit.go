package reporters

import (
	"bufio"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/num"
	"github.com/reckon-ci/reckon/internal/sanitize"
)

// Limits that keep a JUnit file within what CI systems accept (GitLab: 30 MB per file).
const (
	junitMessageRunes  = 500      // failure/error/skipped message attribute
	junitBodyBytes     = 64 << 10 // failure/error body and system-out, per test case
	junitPropertyBytes = 4096     // one property value (engine.errors can be long)
)

// The JUnit document model, laid out by buildJUnit and written by xmlWriter.
type xTestsuites struct {
	Name      string
	Tests     int
	Failures  int
	Errors    int
	Skipped   int
	Time      string
	Timestamp string
	Suites    []xTestsuite
}

type xTestsuite struct {
	Name       string
	ID         int
	Package    string
	Tests      int
	Failures   int
	Errors     int
	Skipped    int
	Time       string
	Timestamp  string
	Properties *xProperties
	Cases      []xTestcase
	SystemOut  string
}

type xProperties struct {
	Props []xProperty
}

type xProperty struct {
	Name  string
	Value string
}

type xTestcase struct {
	Name       string
	Classname  string
	File       string
	Line       int
	Time       string
	Properties *xProperties
	Skipped    *xResult
	Failure    *xResult
	Error      *xResult
	SystemOut  string
}

type xResult struct {
	Message string
	Type    string
	Body    string
}

// WriteJUnit writes r as JUnit XML.
//
// Layout: one <testsuite> per config (in the run's order, named after the config), then one
// suite per check config the run does not list, then the "cross-config" suite for checks with no
// config. One <testcase> per check: classname = config (or "cross-config"), name = check name
// (made unique within its classname, since GitLab keeps only the first of duplicate names). A
// failed check is a <failure message="verdict" type="regression|floor|numerics|health|...">, an
// infrastructure error an <error type="infrastructure">, a skipped check <skipped>; the details,
// explanation and metrics also go to <system-out>, with [[PROPERTY|name=value]] lines for
// consumers that ignore test-case <properties>. Suites carry the spec, engine, testbed and the
// config's engine report as properties. An interrupted run gets an extra <error> test case so that
// no CI shows a partial run as green.
func WriteJUnit(w io.Writer, r *gate.Run) error {
	if r == nil {
		return fmt.Errorf("write JUnit: nil run")
	}
	doc := buildJUnit(r)
	xw := &xmlWriter{w: bufio.NewWriter(w)}
	xw.raw(xml.Header)
	xw.testsuites(doc)
	if xw.err == nil {
		xw.err = xw.w.Flush()
	}
	if xw.err != nil {
		return fmt.Errorf("write JUnit: %w", xw.err)
	}
	return nil
}

// xmlWriter writes the JUnit document by hand so that text keeps its newlines readable (the
// standard encoder writes every newline as a character reference).
type xmlWriter struct {
	w   *bufio.Writer
	err error
}

func (x *xmlWriter) raw(s string) {
	if x.err == nil {
		_, x.err = x.w.WriteString(s)
	}
}

// attrEscaper escapes attribute values; whitespace other than space is kept as a reference so
// that parsers do not normalise it away.
var attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "\n", "&#10;", "\r", "&#13;", "\t", "&#9;")

// textEscaper escapes character data.
var textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func (x *xmlWriter) open(indent, name string, attrs ...string) {
	x.raw(indent + "<" + name)
	for i := 0; i+1 < len(attrs); i += 2 {
		x.raw(" " + attrs[i] + `="` + attrEscaper.Replace(sanitize.CILog(attrs[i+1])) + `"`)
	}
}

func (x *xmlWriter) text(indent, name, body string, attrs ...string) {
	x.open(indent, name, attrs...)
	if body == "" {
		x.raw("/>\n")
		return
	}
	x.raw(">" + textEscaper.Replace(sanitize.CILog(body)) + "</" + name + ">\n")
}

func (x *xmlWriter) properties(indent string, p *xProperties) {
	if p == nil || len(p.Props) == 0 {
		return
	}
	x.raw(indent + "<properties>\n")
	for _, pr := range p.Props {
		x.text(indent+"  ", "property", "", "name", pr.Name, "value", pr.Value)
	}
	x.raw(indent + "</properties>\n")
}

func (x *xmlWriter) testsuites(d *xTestsuites) {
	attrs := []string{"name", d.Name, "tests", strconv.Itoa(d.Tests), "failures", strconv.Itoa(d.Failures),
		"errors", strconv.Itoa(d.Errors), "skipped", strconv.Itoa(d.Skipped), "time", d.Time}
	if d.Timestamp != "" {
		attrs = append(attrs, "timestamp", d.Timestamp)
	}
	x.open("", "testsuites", attrs...)
	x.raw(">\n")
	for i := range d.Suites {
		x.testsuite(&d.Suites[i])
	}
	x.raw("</testsuites>\n")
}

func (x *xmlWriter) testsuite(s *xTestsuite) {
	attrs := []string{"name", s.Name, "id", strconv.Itoa(s.ID)}
	if s.Package != "" {
		attrs = append(attrs, "package", s.Package)
	}
	attrs = append(attrs, "tests", strconv.Itoa(s.Tests), "failures", strconv.Itoa(s.Failures), "errors", strconv.Itoa(s.Errors),
		"skipped", strconv.Itoa(s.Skipped), "time", s.Time)
	if s.Timestamp != "" {
		attrs = append(attrs, "timestamp", s.Timestamp)
	}
	x.open("  ", "testsuite", attrs...)
	x.raw(">\n")
	x.properties("    ", s.Properties)
	for i := range s.Cases {
		x.testcase(&s.Cases[i])
	}
	if s.SystemOut != "" {
		x.text("    ", "system-out", s.SystemOut)
	}
	x.raw("  </testsuite>\n")
}

func (x *xmlWriter) testcase(c *xTestcase) {
	attrs := []string{"name", c.Name, "classname", c.Classname, "time", c.Time}
	if c.File != "" {
		attrs = append(attrs, "file", c.File)
	}
	if c.File != "" && c.Line > 0 {
		attrs = append(attrs, "line", strconv.Itoa(c.Line))
	}
	x.open("    ", "testcase", attrs...)
	if c.Properties == nil && c.Skipped == nil && c.Failure == nil && c.Error == nil && c.SystemOut == "" {
		x.raw("/>\n")
		return
	}
	x.raw(">\n")
	x.properties("      ", c.Properties)
	for _, r := range []struct {
		name string
		res  *xResult
	}{{"skipped", c.Skipped}, {"failure", c.Failure}, {"error", c.Error}} {
		if r.res == nil {
			continue
		}
		var attrs []string
		if r.res.Message != "" {
			attrs = append(attrs, "message", r.res.Message)
		}
		if r.res.Type != "" {
			attrs = append(attrs, "type", r.res.Type)
		}
		x.text("      ", r.name, r.res.Body, attrs...)
	}
	if c.SystemOut != "" {
		x.text("      ", "system-out", c.SystemOut)
	}
	x.raw("    </testcase>\n")
}

// suiteGroup is the checks of one JUnit suite.
type suiteGroup struct {
	name   string
	config *gate.Config
	checks []*gate.Check
}

// groupChecks splits the run's effective checks into suites (see WriteJUnit).
func groupChecks(r *gate.Run, checks []gate.Check) []*suiteGroup {
	var groups []*suiteGroup
	byName := map[string]*suiteGroup{}
	for i := range r.Configs {
		c := &r.Configs[i]
		if _, dup := byName[c.Name]; dup {
			continue
		}
		g := &suiteGroup{name: c.Name, config: c}
		groups = append(groups, g)
		byName[c.Name] = g
	}
	var cross *suiteGroup
	for i := range checks {
		c := &checks[i]
		if c.Config == "" {
			if cross == nil {
				cross = &suiteGroup{name: CrossConfig}
			}
			cross.checks = append(cross.checks, c)
			continue
		}
		g := byName[c.Config]
		if g == nil {
			g = &suiteGroup{name: c.Config}
			groups = append(groups, g)
			byName[c.Config] = g
		}
		g.checks = append(g.checks, c)
	}
	if cross != nil {
		groups = append(groups, cross)
	}
	return groups
}

// buildJUnit lays out the JUnit document of r.
func buildJUnit(r *gate.Run) *xTestsuites {
	checks := r.EffectiveChecks()
	doc := &xTestsuites{Name: "reckon " + cleanText(r.SpecName), Timestamp: junitTimestamp(r.StartedAt)}
	var total time.Duration
	runProps := runProperties(r)
	for id, g := range groupChecks(r, checks) {
		s := xTestsuite{Name: cleanText(g.name), ID: id, Package: cleanText(r.SpecName), Timestamp: doc.Timestamp}
		props := append([]xProperty(nil), runProps...)
		if g.config != nil {
			props = append(props, configProperties(g.config)...)
			s.SystemOut = suiteOut(g.config)
		}
		s.Properties = &xProperties{Props: props}
		var d time.Duration
		used := map[string]bool{}
		for _, c := range g.checks {
			tc := testcase(r, c, g.name)
			for n, base := 2, tc.Name; used[tc.Name]; n++ {
				tc.Name = fmt.Sprintf("%s (%d)", base, n)
			}
			used[tc.Name] = true
			s.Cases = append(s.Cases, tc)
			s.Tests++
			switch {
			case tc.Failure != nil:
				s.Failures++
			case tc.Error != nil:
				s.Errors++
			case tc.Skipped != nil:
				s.Skipped++
			}
			if c.Duration > 0 {
				d += c.Duration
			}
		}
		s.Time = seconds(d)
		total += d
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Errors += s.Errors
		doc.Skipped += s.Skipped
		doc.Suites = append(doc.Suites, s)
	}
	if !r.StartedAt.IsZero() && r.FinishedAt.After(r.StartedAt) {
		total = r.FinishedAt.Sub(r.StartedAt)
	}
	doc.Time = seconds(total)
	return doc
}

func testcase(r *gate.Run, c *gate.Check, classname string) xTestcase {
	name := cleanText(c.Name)
	if strings.TrimSpace(name) == "" {
		name = "(unnamed " + c.Kind + " check)"
	}
	tc := xTestcase{Name: name, Classname: cleanText(classname), File: cleanText(r.SpecPath), Line: c.Line, Time: seconds(c.Duration)}
	props := checkProperties(c)
	if len(props) > 0 {
		tc.Properties = &xProperties{Props: props}
	}
	expl := cleanText(explanation(r, c))
	details := cleanText(c.Details)
	msg := Line(c, junitMessageRunes)
	switch c.EffectiveStatus() {
	case gate.StatusFailed:
		if msg == "" {
			msg = c.Kind + " check failed"
		}
		tc.Failure = &xResult{Message: msg, Type: failureType(c), Body: clip(joinBlocks(msg, details, prefixed("Explanation: ", expl)), junitBodyBytes)}
	case gate.StatusError:
		if msg == "" {
			msg = "infrastructure error"
		}
		body := joinBlocks(msg, details)
		if cfg := r.ConfigNamed(c.Config); cfg != nil && cfg.LogTail != "" && !containsTail(details, cfg.LogTail) {
			body = joinBlocks(body, "Engine log tail ("+cleanText(cfg.LogPath)+"):\n"+cleanText(cfg.LogTail))
		}
		typ := string(c.EffectiveCategory())
		if typ == "" {
			typ = string(gate.CategoryInfrastructure)
		}
		tc.Error = &xResult{Message: msg, Type: typ, Body: clip(body, junitBodyBytes)}
	case gate.StatusSkipped:
		tc.Skipped = &xResult{Message: msg}
	}
	var out strings.Builder
	for _, b := range []string{msg, details, prefixed("Explanation: ", expl)} {
		if b != "" {
			out.WriteString(b)
			out.WriteString("\n")
		}
	}
	for _, p := range props {
		fmt.Fprintf(&out, "[[PROPERTY|%s=%s]]\n", p.Name, p.Value)
	}
	tc.SystemOut = clip(out.String(), junitBodyBytes)
	return tc
}

// containsTail reports whether details already carries the log tail (its last non-empty line).
func containsTail(details, tail string) bool {
	last := strings.TrimSpace(lastLines(cleanText(tail), 1))
	return last != "" && strings.Contains(details, last)
}

// failureType is the JUnit failure type of a failed check: its category (regression,
// broken_invariant, policy, ...), "failed" when it has none.
func failureType(c *gate.Check) string {
	if cat := c.EffectiveCategory(); cat != "" {
		return cleanText(string(cat))
	}
	return "failed"
}

// propertyList collects JUnit properties; empty values are left out and long ones clipped.
type propertyList []xProperty

func (p *propertyList) add(k, v string) {
	if v != "" {
		*p = append(*p, xProperty{Name: k, Value: clip(cleanText(v), junitPropertyBytes)})
	}
}

func checkProperties(c *gate.Check) []xProperty {
	var props propertyList
	add := props.add
	add("kind", c.Kind)
	add("outcome", outcomeText(c))
	add("against", c.Against)
	add("category", string(c.Category))
	add("labels", strings.Join(c.Labels, ","))
	add("metric", c.Metric())
	for _, f := range []struct {
		k string
		v *float64
	}{{"base_median", baseMedian(c)}, {"head_median", headMedian(c)}, {"ratio", ratio(c)}, {"ci_low", ciLow(c)}, {"ci_high", ciHigh(c)}, {"p_value", pValue(c)}} {
		if f.v != nil {
			add(f.k, num.Exact(*f.v))
		}
	}
	keys := make([]string, 0, len(c.Metrics))
	for k := range c.Metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add(k, num.Exact(c.Metrics[k]))
	}
	return props
}

func runProperties(r *gate.Run) []xProperty {
	var props propertyList
	add := props.add
	add("spec", r.SpecName)
	add("spec_path", r.SpecPath)
	add("engine", r.Engine)
	add("testbed_key", r.TestbedKey)
	add("reckon_version", r.ReckonVersion)
	add("git_commit", r.GitCommit)
	add("git_commit_source", r.GitCommitSource)
	add("engine_version", r.EngineVersion)
	add("label_filter", r.LabelFilter)
	add("shards", shardLine(r))
	add("launch_order", launchOrderLine(r))
	if r.Strict {
		add("strict", "true")
	}
	if r.Interrupted {
		add("interrupted", "true")
		add("interrupt_reason", r.InterruptReason)
	}
	for _, kv := range flatten("testbed", r.Testbed) {
		add(kv[0], kv[1])
	}
	return props
}

func configProperties(c *gate.Config) []xProperty {
	var props propertyList
	add := props.add
	add("config", c.Name)
	add("launches", strconv.Itoa(c.Launches))
	add("launch_error", fitMessage(c.LaunchError, junitMessageRunes))
	add("log_path", c.LogPath)
	add("args", strings.Join(c.Args, " "))
	add("engine_version", c.EngineVersion)
	add("numerics_file", c.NumericsFile)
	if len(c.GPUPeakMiB) > 0 {
		ps := make([]string, len(c.GPUPeakMiB))
		for i, v := range c.GPUPeakMiB {
			ps[i] = num.Exact(v)
		}
		add("gpu_peak_mib", strings.Join(ps, ","))
	}
	for _, kv := range flatten("engine", c.Engine) {
		add(kv[0], kv[1])
	}
	add("trials", strconv.Itoa(len(c.Trials)))
	return props
}

// suiteOut is a config suite's system-out: the launch error and the engine log tail, if any.
func suiteOut(c *gate.Config) string {
	if c.LaunchError == "" {
		return ""
	}
	return clip(joinBlocks("Launch error: "+cleanText(c.LaunchError), prefixed("Engine log tail:\n", cleanText(c.LogTail))), junitBodyBytes)
}

// flatten turns a JSON object into sorted dotted name/value pairs; arrays are JSON text.
func flatten(prefix string, m map[string]any) [][2]string {
	var out [][2]string
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := prefix + "." + k
		switch v := m[k].(type) {
		case nil:
		case map[string]any:
			out = append(out, flatten(name, v)...)
		case string:
			out = append(out, [2]string{name, v})
		case bool:
			out = append(out, [2]string{name, strconv.FormatBool(v)})
		default:
			if f, ok := mapNum(m, k); ok {
				out = append(out, [2]string{name, num.Exact(f)})
				continue
			}
			b, err := json.Marshal(gate.JSONSafe(v))
			if err != nil {
				b = []byte(fmt.Sprint(v))
			}
			out = append(out, [2]string{name, string(b)})
		}
	}
	return out
}

func junitTimestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05")
}

func seconds(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
}

// joinBlocks joins the non-empty blocks with blank lines.
func joinBlocks(blocks ...string) string {
	var keep []string
	for _, b := range blocks {
		if strings.TrimSpace(b) != "" {
			keep = append(keep, strings.TrimRight(b, "\n"))
		}
	}
	return strings.Join(keep, "\n\n")
}

func prefixed(prefix, s string) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return prefix + s
}
