package reporters

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"github.com/reckon-ci/reckon/spec"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/gate"
)

// The JUnit document as a consumer reads it (independent of the writer's own types).
type pSuites struct {
	XMLName  xml.Name `xml:"testsuites"`
	Name     string   `xml:"name,attr"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Time     float64  `xml:"time,attr"`
	Suites   []pSuite `xml:"testsuite"`
}

type pSuite struct {
	Name       string  `xml:"name,attr"`
	Tests      int     `xml:"tests,attr"`
	Failures   int     `xml:"failures,attr"`
	Errors     int     `xml:"errors,attr"`
	Skipped    int     `xml:"skipped,attr"`
	Time       float64 `xml:"time,attr"`
	Properties []pProp `xml:"properties>property"`
	Cases      []pCase `xml:"testcase"`
	SystemOut  string  `xml:"system-out"`
}

type pProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type pResult struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Body    string `xml:",chardata"`
}

type pCase struct {
	Name       string   `xml:"name,attr"`
	Classname  string   `xml:"classname,attr"`
	Time       float64  `xml:"time,attr"`
	Properties []pProp  `xml:"properties>property"`
	Skipped    *pResult `xml:"skipped"`
	Failure    *pResult `xml:"failure"`
	Error      *pResult `xml:"error"`
	SystemOut  string   `xml:"system-out"`
}

func (c pCase) status() gate.Status {
	switch {
	case c.Failure != nil:
		return gate.StatusFailed
	case c.Error != nil:
		return gate.StatusError
	case c.Skipped != nil:
		return gate.StatusSkipped
	}
	return gate.StatusPassed
}

func props(ps []pProp) map[string]string {
	m := map[string]string{}
	for _, p := range ps {
		m[p.Name] = p.Value
	}
	return m
}

// parseJUnit parses data strictly and checks that every count attribute matches the test cases.
func parseJUnit(data []byte) (*pSuites, error) {
	var doc pSuites
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not well-formed JUnit: %w", err)
	}
	var tot [4]int
	for _, s := range doc.Suites {
		var n [4]int
		for _, c := range s.Cases {
			n[0]++
			switch c.status() {
			case gate.StatusFailed:
				n[1]++
			case gate.StatusError:
				n[2]++
			case gate.StatusSkipped:
				n[3]++
			}
			if c.Name == "" || c.Classname == "" {
				return nil, fmt.Errorf("suite %q: test case without name or classname", s.Name)
			}
		}
		if got := [4]int{s.Tests, s.Failures, s.Errors, s.Skipped}; got != n {
			return nil, fmt.Errorf("suite %q: counts tests/failures/errors/skipped %v, test cases say %v", s.Name, got, n)
		}
		for i := range tot {
			tot[i] += n[i]
		}
	}
	if got := [4]int{doc.Tests, doc.Failures, doc.Errors, doc.Skipped}; got != tot {
		return nil, fmt.Errorf("testsuites: counts %v, test cases say %v", got, tot)
	}
	return &doc, nil
}

func junitOf(t *testing.T, r *gate.Run) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteJUnit(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestJUnitSuitesCasesAndCounts(t *testing.T) {
	r := sampleRun()
	data := junitOf(t, r)
	doc, err := parseJUnit(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	var names []string
	for _, s := range doc.Suites {
		names = append(names, s.Name)
	}
	if want := "nccl,custom-ar,eagle3,graph-bs-160,cross-config"; strings.Join(names, ",") != want {
		t.Fatalf("suites %v, want %s", names, want)
	}
	if doc.Tests != 9 || doc.Failures != 2 || doc.Errors != 1 || doc.Skipped != 1 {
		t.Fatalf("counts tests=%d failures=%d errors=%d skipped=%d", doc.Tests, doc.Failures, doc.Errors, doc.Skipped)
	}
	if doc.Time != 433 {
		t.Errorf("testsuites time %v, want the run's 433 s", doc.Time)
	}
	// Every check is a test case with classname = config and its status.
	got := map[string]pCase{}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if c.Classname != s.Name {
				t.Errorf("case %q classname %q in suite %q", c.Name, c.Classname, s.Name)
			}
			got[c.Classname+"/"+c.Name] = c
		}
	}
	for _, c := range r.Checks {
		cls := c.Config
		if cls == "" {
			cls = CrossConfig
		}
		tc, ok := got[cls+"/"+c.Name]
		if !ok {
			t.Errorf("check %s/%s has no test case", cls, c.Name)
			continue
		}
		if tc.status() != c.Status {
			t.Errorf("check %s/%s: JUnit status %s, want %s", cls, c.Name, tc.status(), c.Status)
		}
	}
	reg := got["custom-ar/output_throughput vs nccl"]
	if reg.Failure == nil || reg.Failure.Message != "custom-ar: output throughput -57% vs nccl" || reg.Failure.Type != "regression" {
		t.Fatalf("regression failure: %+v", reg.Failure)
	}
	if !strings.Contains(reg.Failure.Body, "KV cache -91% (10.42 -> 0.90 GiB") || !strings.Contains(reg.SystemOut, "custom AR buffers 3.85 GiB") {
		t.Errorf("failure lacks the explanation:\n%s", reg.Failure.Body)
	}
	p := props(reg.Properties)
	if p["ratio"] == "" || p["p_value"] != "0.0079" || p["ci_low"] != "0.41" || p["metric"] != "output_throughput" {
		t.Errorf("test-case properties: %v", p)
	}
	if !strings.Contains(reg.SystemOut, "[[PROPERTY|p_value=0.0079]]") {
		t.Errorf("system-out lacks the property lines:\n%s", reg.SystemOut)
	}
	if f := got["custom-ar/kv_cache_gib >= 8"]; f.Failure == nil || f.Failure.Type != "broken_invariant" {
		t.Errorf("floor failure: %+v", f.Failure)
	}
	if s := got["graph-bs-160/p99_ttft_ms vs baseline"]; s.Skipped == nil || !strings.Contains(s.Skipped.Message, "inconclusive") {
		t.Errorf("skipped: %+v", s.Skipped)
	}
	infra := got["eagle3/health"]
	if infra.Error == nil || infra.Error.Type != "infrastructure" {
		t.Fatalf("launch failure is not an infrastructure error: %+v", infra)
	}
	if !strings.Contains(infra.Error.Body, "RuntimeError: CUDA out of memory") || !strings.Contains(infra.Error.Body, "<script>alert('x')</script>") {
		t.Errorf("error body lacks the log tail:\n%s", infra.Error.Body)
	}
	sp := props(doc.Suites[1].Properties)
	for k, v := range map[string]string{"spec": "pcie-custom-ar", "engine": "refengine", "testbed.topology": "PCIe",
		"engine.kv_cache_gib": "0.9", "engine.kv_cache_tokens": "104857", "launches": "1", "testbed.cuda.version": "12.4"} {
		if sp[k] != v {
			t.Errorf("suite property %s = %q, want %q", k, sp[k], v)
		}
	}
	if !strings.Contains(doc.Suites[2].SystemOut, "CUDA out of memory") {
		t.Errorf("failed config's suite system-out lacks the log tail: %q", doc.Suites[2].SystemOut)
	}
}

func TestJUnitValidatorRejectsBadDocuments(t *testing.T) {
	good := junitOf(t, sampleRun())
	for name, bad := range map[string][]byte{
		"miscounted":  bytes.Replace(good, []byte(`tests="9" failures="2"`), []byte(`tests="9" failures="1"`), 1),
		"suite count": bytes.Replace(good, []byte(`name="custom-ar" id="1" package="pcie-custom-ar" tests="4"`), []byte(`name="custom-ar" id="1" package="pcie-custom-ar" tests="5"`), 1),
		"unescaped":   bytes.Replace(good, []byte("&lt;script&gt;"), []byte("<script>"), 1),
		"truncated":   good[:len(good)/2],
	} {
		if bytes.Equal(bad, good) {
			t.Fatalf("%s: tampering did not change the document", name)
		}
		if _, err := parseJUnit(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestJUnitEscapesAndStripsControlCharacters(t *testing.T) {
	r := &gate.Run{SpecName: "esc", Configs: []gate.Config{{Name: "a&b"}}, Checks: []gate.Check{{Verdict: gate.Verdict{Name: "x<y> \"q\"\x00", Kind: string(spec.KindFloor), Config: "a&b", Message: "line one\nline two\x1b[31m red\x1b[0m \x07bell ]]> \xff", Details: "tab\there\r\nCR\x0b<b>&amp;</b>", Metrics: map[string]float64{"v\x01": 1}}, Status: gate.StatusFailed}}}
	data := junitOf(t, r)
	for _, c := range []byte{0x00, 0x01, 0x07, 0x0b, 0x1b} {
		if bytes.IndexByte(data, c) >= 0 {
			t.Errorf("control character %#x in the XML", c)
		}
	}
	doc, err := parseJUnit(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	tc := doc.Suites[0].Cases[0]
	if tc.Name != `x<y> "q"` || tc.Classname != "a&b" {
		t.Errorf("name %q classname %q", tc.Name, tc.Classname)
	}
	if tc.Failure.Message != "a&b: line one line two red bell ]]> \uFFFD" { // the config first (Line)
		t.Errorf("message not one clean line: %q", tc.Failure.Message)
	}
	if !strings.Contains(tc.Failure.Body, "tab\there\nCR<b>&amp;</b>") {
		t.Errorf("body: %q", tc.Failure.Body)
	}
}

func TestJUnitSyntheticCasesAndUniqueNames(t *testing.T) {
	r := &gate.Run{
		SpecName: "partial", Interrupted: true,
		Configs: []gate.Config{{Name: "a", LaunchError: "port 30000 taken", LogTail: "bind: address already in use"}, {Name: "b"}},
		Checks: []gate.Check{
			{Verdict: gate.Verdict{Name: "floor", Kind: string(spec.KindFloor), Config: "b"}, Status: gate.StatusPassed},
			{Verdict: gate.Verdict{Name: "floor (2)", Kind: string(spec.KindFloor), Config: "b"}, Status: gate.StatusPassed},
			{Verdict: gate.Verdict{Name: "floor", Kind: string(spec.KindFloor), Config: "b"}, Status: gate.StatusPassed},
			{Verdict: gate.Verdict{Name: "weird", Kind: string(spec.KindFloor), Config: "b"}, Status: "exploded"},
			{Verdict: gate.Verdict{Name: "derived", Kind: string(spec.KindThroughput), Config: "b", Outcome: "regression"}},
		},
	}
	doc, err := parseJUnit(junitOf(t, r))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]pCase{}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if _, dup := cases[c.Classname+"/"+c.Name]; dup {
				t.Errorf("duplicate test case %s/%s", c.Classname, c.Name)
			}
			cases[c.Classname+"/"+c.Name] = c
		}
	}
	if c := cases["a/launch"]; c.Error == nil || !strings.Contains(c.Error.Body, "bind: address already in use") {
		t.Errorf("launch failure without a check is not reported: %+v", c)
	}
	if c := cases["cross-config/run interrupted"]; c.Error == nil || c.Error.Type != "interrupted" {
		t.Errorf("interrupted run not reported: %+v", c)
	}
	if _, ok := cases["b/floor (3)"]; !ok {
		t.Errorf("duplicate names not made unique: %v", cases)
	}
	if c := cases["b/weird"]; c.Error == nil {
		t.Errorf("unknown status must be an error, got %s", c.status())
	}
	if c := cases["b/derived"]; c.Failure == nil || c.Failure.Type != "regression" {
		t.Errorf("status derived from outcome: %+v", c)
	}
	if n := r.Count(); n.Errors != 3 || n.Failed != 1 || n.Passed != 3 || r.Green() {
		t.Errorf("Count %+v Green %v", n, r.Green())
	}
}

func TestJUnitClipsHugeLogs(t *testing.T) {
	huge := strings.Repeat("noise line\n", 200000) + "FATAL: the real reason\n"
	r := &gate.Run{SpecName: "big", Checks: []gate.Check{{Verdict: gate.Verdict{Name: "health", Config: "a", Kind: gate.KindHealth, Message: "died", Details: huge}, Status: gate.StatusError}}}
	data := junitOf(t, r)
	if len(data) > 4*junitBodyBytes {
		t.Fatalf("JUnit is %d bytes for one check", len(data))
	}
	doc, err := parseJUnit(data)
	if err != nil {
		t.Fatal(err)
	}
	body := doc.Suites[0].Cases[0].Error.Body
	if !strings.Contains(body, "FATAL: the real reason") || !strings.Contains(body, "bytes cut") {
		t.Errorf("clipped body lost the tail or the marker: ...%s", body[len(body)-200:])
	}
}

// TestJUnitValidatesAgainstXSD checks the XML against testdata/junit.xsd with xmllint, when
// xmllint is installed (Debian: libxml2-utils).
func TestJUnitValidatesAgainstXSD(t *testing.T) {
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		t.Skip("xmllint not installed (apt-get install libxml2-utils)")
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "junit.xml")
	if err := os.WriteFile(good, junitOf(t, sampleRun()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := sampleRun()
	r.Interrupted = true
	partial := filepath.Join(dir, "partial.xml")
	if err := os.WriteFile(partial, junitOf(t, r), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{good, partial} {
		if out, err := exec.Command(xmllint, "--noout", "--schema", "testdata/junit.xsd", f).CombinedOutput(); err != nil {
			t.Errorf("%s does not validate: %v\n%s", filepath.Base(f), err, out)
		}
	}
	// The schema must reject a test case with two results.
	bad := filepath.Join(dir, "bad.xml")
	data := bytes.Replace(junitOf(t, sampleRun()), []byte(`type="floor">`), []byte(`type="floor"></failure><error message="x">`), 1)
	data = bytes.Replace(data, []byte("allreduce custom</failure>"), []byte("allreduce custom</error>"), 1)
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(xmllint, "--noout", "--schema", "testdata/junit.xsd", bad).CombinedOutput(); err == nil {
		t.Errorf("a test case with both failure and error validates:\n%s", out)
	}
}

// consumerDir holds the Node project whose junit2json (from the npm registry) parses our XML.
const consumerDir = "testdata/junit-consumer"

// TestJUnitThirdPartyConsumer parses the JUnit with junit2json, a JUnit parser from the npm
// registry, and checks that it sees the same suites, cases, statuses, messages and properties.
// It needs node and `npm ci --prefix reporters/testdata/junit-consumer`; it is skipped without
// them unless RECKON_REQUIRE_JUNIT_CONSUMER=1, which makes their absence a failure (set in CI).
func TestJUnitThirdPartyConsumer(t *testing.T) {
	node, err := exec.LookPath("node")
	required := os.Getenv("RECKON_REQUIRE_JUNIT_CONSUMER") == "1"
	missing := func(why string) {
		if required {
			t.Fatalf("JUnit consumer required but %s", why)
		}
		t.Skip(why)
	}
	if err != nil {
		missing("node is not installed")
	}
	if _, err := os.Stat(filepath.Join(consumerDir, "node_modules", "junit2json", "package.json")); err != nil {
		missing("junit2json is not installed: run npm ci --prefix reporters/testdata/" + filepath.Base(consumerDir))
	}
	r := sampleRun()
	r.Interrupted = true // adds the synthetic error case too
	dir := t.TempDir()
	good := filepath.Join(dir, "junit.xml")
	data := junitOf(t, r)
	if err := os.WriteFile(good, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if problems := compareConsumer(t, r, consume(t, node, good)); len(problems) > 0 {
		t.Errorf("junit2json reads the JUnit differently:\n%s", strings.Join(problems, "\n"))
	}
	// The comparison must catch a document that lies: drop the regression's <failure>.
	start := bytes.Index(data, []byte(`<failure message="custom-ar: output throughput`))
	end := start + bytes.Index(data[start:], []byte("</failure>")) + len("</failure>")
	bad := filepath.Join(dir, "bad.xml")
	if err := os.WriteFile(bad, append(append([]byte{}, data[:start]...), data[end:]...), 0o644); err != nil {
		t.Fatal(err)
	}
	if problems := compareConsumer(t, r, consume(t, node, bad)); len(problems) == 0 {
		t.Error("a JUnit without the regression's failure passed the consumer comparison")
	}
}

// consumerView is what consume.mjs prints.
type consumerView struct {
	Tests, Failures, Errors int
	Suites                  []struct {
		Name                             string
		Tests, Failures, Errors, Skipped int
		Properties                       map[string]any
		Cases                            []consumerCase
	}
}

type consumerCase struct {
	Name, Classname, Status, Message, Type, Body, SystemOut string
	Properties                                              map[string]any
}

func consume(t *testing.T, node, file string) *consumerView {
	t.Helper()
	cmd := exec.Command(node, filepath.Join(consumerDir, "consume.mjs"), file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("junit2json failed: %v\n%s", err, stderr.String())
	}
	var v consumerView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("consumer output: %v\n%s", err, out)
	}
	return &v
}

// compareConsumer lists the differences between what the consumer saw and the run.
func compareConsumer(t *testing.T, r *gate.Run, seen *consumerView) []string {
	t.Helper()
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	n := r.Count()
	if seen.Tests != n.Total || seen.Failures != n.Failed || seen.Errors != n.Errors {
		bad("counts %d/%d/%d, want %d/%d/%d", seen.Tests, seen.Failures, seen.Errors, n.Total, n.Failed, n.Errors)
	}
	want := map[string]gate.Check{}
	for _, c := range r.EffectiveChecks() {
		cls := c.Config
		if cls == "" {
			cls = CrossConfig
		}
		want[cls+"/"+c.Name] = c
	}
	cases := 0
	var reg *consumerCase
	for i := range seen.Suites {
		s := &seen.Suites[i]
		skipped := 0
		for j := range s.Cases {
			c := &s.Cases[j]
			cases++
			w, ok := want[c.Classname+"/"+c.Name]
			if !ok {
				bad("unknown case %s/%s", c.Classname, c.Name)
				continue
			}
			if gate.Status(c.Status) != w.EffectiveStatus() {
				bad("%s/%s: status %s, want %s", c.Classname, c.Name, c.Status, w.EffectiveStatus())
			}
			if gate.Status(c.Status) != gate.StatusPassed && c.Message != oneLine(w.Message, junitMessageRunes) {
				bad("%s/%s: message %q, want %q", c.Classname, c.Name, c.Message, w.Message)
			}
			if gate.Status(c.Status) == gate.StatusSkipped {
				skipped++
			}
			if c.Classname == "custom-ar" && c.Name == "output_throughput vs nccl" {
				reg = c
			}
		}
		if skipped != s.Skipped {
			bad("suite %s: skipped=%d but %d skipped cases", s.Name, s.Skipped, skipped)
		}
	}
	if cases != n.Total {
		bad("%d cases, want %d", cases, n.Total)
	}
	switch {
	case reg == nil:
		bad("no regression case")
	case reg.Type != "regression" || !strings.Contains(reg.Body, "KV cache -91%"):
		bad("regression type %q body %q", reg.Type, reg.Body)
	case fmt.Sprint(reg.Properties["p_value"]) != "0.0079":
		bad("test-case properties: %v", reg.Properties)
	}
	if len(seen.Suites) == 0 || fmt.Sprint(seen.Suites[0].Properties["engine.kv_cache_gib"]) != "10.42" {
		bad("suite properties missing")
	}
	return problems
}

func TestJUnitTimeAttributes(t *testing.T) {
	r := &gate.Run{SpecName: "t", Checks: []gate.Check{
		{Verdict: gate.Verdict{Name: "a", Config: "x"}, Status: gate.StatusPassed, Duration: 1500 * time.Millisecond},
		{Verdict: gate.Verdict{Name: "b", Config: "x"}, Status: gate.StatusPassed, Duration: 2 * time.Second},
	}}
	doc, err := parseJUnit(junitOf(t, r))
	if err != nil {
		t.Fatal(err)
	}
	if doc.Suites[0].Time != 3.5 || doc.Time != 3.5 || doc.Suites[0].Cases[0].Time != 1.5 {
		t.Errorf("times: suites %v suite %v case %v", doc.Time, doc.Suites[0].Time, doc.Suites[0].Cases[0].Time)
	}
	if err := WriteJUnit(&bytes.Buffer{}, nil); err == nil {
		t.Error("nil run accepted")
	}
}
