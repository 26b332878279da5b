package workload

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/internal/domain"
)

// mpiPrefix matches the per-rank prefixes that mpirun --tag-output adds ("[1,0]<stdout>:").
var mpiPrefix = regexp.MustCompile(`^\s*\[\d+,\d+\]<std(?:out|err)>:`)

// reNCCLRow matches the start of a table row ("size count type"), also behind launcher tags, for
// output whose header was lost.
var reNCCLRow = regexp.MustCompile(`(?m)^\s*(?:\[\d+\]|\[\d+,\d+\]<stdout>:)?\s*\d+\s+\d+\s+(?:float|double|half|bfloat16|int8|uint8|int32|uint32|int64|uint64|f8e4m3|f8e5m2|fp8_e4m3|fp8_e5m2)\s`)

func looksLikeNCCL(b []byte) bool {
	return bytes.Contains(b, []byte("Avg bus bandwidth")) ||
		(bytes.Contains(b, []byte("busbw")) && (bytes.Contains(b, []byte("out-of-place")) || bytes.Contains(b, []byte("in-place")) || bytes.Contains(b, []byte("algbw")))) ||
		len(reNCCLRow.FindAllIndex(b, 2)) == 2
}

var (
	reAvgBus    = regexp.MustCompile(`^#?\s*Avg bus bandwidth\s*:\s*(\S+)\s*(\S*)`)
	reOOB       = regexp.MustCompile(`^#?\s*Out of bounds values\s*:\s*(\d+)\s*(\S*)`)
	reCollStart = regexp.MustCompile(`^#?\s*Collective test starting:\s*(\S+)`)
	reTestsVer  = regexp.MustCompile(`nccl-tests version\s+(\S+)`)
	reNCCLVer   = regexp.MustCompile(`NCCL version\s+(\S+)`)
	reNThread   = regexp.MustCompile(`^#?\s*nThread\s+\d+\s+nGpus`)
	// Per-process tags that some launchers put at the start of every write, also inside a row
	// ("[0]   1048576 ... -1[0]   1626.5 ..."), and srun --label prefixes ("3: ").
	reTagStart = regexp.MustCompile(`^\s*\[\d+\]`)
	reTag      = regexp.MustCompile(`\[\d+\]`)
	reSrunTag  = regexp.MustCompile(`^\s*\d+:\s`)
	reInPlace  = regexp.MustCompile(`(^|[^-])in-place`)
)

// cleanNCCLLine removes launcher prefixes from one line of output.
func cleanNCCLLine(s string) string {
	s = mpiPrefix.ReplaceAllString(s, "")
	if reTagStart.MatchString(s) {
		s = reTag.ReplaceAllString(s, " ")
	}
	return reSrunTag.ReplaceAllString(s, "")
}

// ncclRun collects one nccl-tests run (one table and its footer) while parsing.
type ncclRun struct {
	r           *Result
	n           *NCCLResult
	avgFound    bool
	anyChecked  bool
	sawTable    bool
	footerSeen  bool
	avgBad      bool
	guessed     int
	inPlaceOnly int
}

func newNCCLRun() *ncclRun {
	r := &Result{Schema: ResultSchema}
	r.Metadata.Tool = "nccl-tests"
	r.Metadata.SourceFormat = FormatNCCL
	n := &NCCLResult{OutOfBounds: -1}
	r.NCCL = n
	return &ncclRun{r: r, n: n}
}

// importNCCLText parses nccl-tests stdout (all_reduce_perf and friends). A file holding several
// runs (outputs appended one after the other) gives one result per run. Lines whose leading "#"
// was lost (copied through Markdown, or very old versions) are read too.
func importNCCLText(b []byte) ([]*Result, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	p := &ncclParser{cur: newNCCLRun(), order: []bool{false, true}}
	for sc.Scan() {
		if err := p.scanLine(sc.Text()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading nccl-tests output: %w", err)
	}
	runs := append(p.runs, p.cur)
	var out []*Result
	for _, run := range runs {
		if len(run.n.Rows) == 0 && !run.footerSeen && !run.sawTable {
			continue
		}
		out = append(out, run.finish())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no nccl-tests table found")
	}
	return out, nil
}

// ncclParser is the state of importNCCLText between lines: the runs read so far, the run being
// read, the table layout from its header and the order of its measurement groups.
type ncclParser struct {
	runs       []*ncclRun
	cur        *ncclRun
	layout     ncclLayout
	haveLayout bool
	order      []bool // per measurement group: in-place?
	lineNo     int
}

// boundary starts a new run when the current one has rows or a footer: a table header, a banner
// or a "Collective test starting" after them begins another run.
func (p *ncclParser) boundary() {
	if len(p.cur.n.Rows) > 0 || p.cur.footerSeen {
		p.runs = append(p.runs, p.cur)
		p.cur = newNCCLRun()
		p.haveLayout = false
		p.order = []bool{false, true}
	}
}

// scanLine reads one line of output: a version or run-start line, a footer line, or a line of
// the table (banner, header, row).
func (p *ncclParser) scanLine(text string) error {
	p.lineNo++
	if len(p.runs) >= MaxImportRecords {
		return fmt.Errorf("line %d: more than %d nccl-tests runs in one file", p.lineNo, MaxImportRecords)
	}
	trim := strings.TrimSpace(cleanNCCLLine(text))
	if trim == "" {
		return nil
	}
	cur := p.cur
	if m := reTestsVer.FindStringSubmatch(trim); m != nil {
		p.boundary()
		p.cur.r.Metadata.ToolVersion = m[1]
		return nil
	}
	if m := reNCCLVer.FindStringSubmatch(trim); m != nil && cur.r.Metadata.Labels["nccl_version"] == "" {
		cur.r.Metadata.labels()["nccl_version"] = m[1]
	}
	if reNThread.MatchString(trim) {
		p.boundary() // the first line of every run's output
	}
	if m := reCollStart.FindStringSubmatch(trim); m != nil {
		p.boundary()
		p.cur.n.Collective = m[1]
		return nil
	}
	if m := reAvgBus.FindStringSubmatch(trim); m != nil {
		return p.avgBusBW(m[1], m[2])
	}
	if m := reOOB.FindStringSubmatch(trim); m != nil {
		return p.outOfBounds(m[1], m[2])
	}
	return p.tableLine(trim)
}

// avgBusBW reads the "# Avg bus bandwidth" footer: its value (a non-finite one is a warning) and
// its status.
func (p *ncclParser) avgBusBW(val, status string) error {
	cur := p.cur
	f, err := strconv.ParseFloat(val, 64)
	switch {
	case err != nil && !strings.Contains(strings.ToLower(val), "nan") && !strings.Contains(strings.ToLower(val), "inf"):
		return fmt.Errorf("line %d: Avg bus bandwidth %q is not a number", p.lineNo, val)
	case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		cur.r.warnf("line %d: Avg bus bandwidth is %s: avg_busbw_gbps is missing", p.lineNo, val)
		cur.avgBad = true
	case f < 0 || f > domain.MaxMagnitude:
		return fmt.Errorf("line %d: Avg bus bandwidth %s is outside [0, %g]", p.lineNo, val, float64(domain.MaxMagnitude))
	default:
		cur.n.AvgBusBWGBps = f
		cur.avgFound = true
	}
	cur.n.AvgBusBWStatus = status
	cur.footerSeen = true
	return nil
}

// outOfBounds reads the "# Out of bounds values" footer: the count and whether it FAILED.
func (p *ncclParser) outOfBounds(val, status string) error {
	cur := p.cur
	oob, err := strconv.ParseInt(val, 10, 64)
	if err != nil || oob > MaxImportCount {
		return fmt.Errorf("line %d: Out of bounds values %q: expected a count in [0, %d]", p.lineNo, val, int64(MaxImportCount))
	}
	cur.n.OutOfBounds = int(oob)
	if status == "FAILED" {
		cur.r.warnf("nccl-tests reported out-of-bounds values: %s", val)
	}
	cur.footerSeen = true
	return nil
}

// tableLine reads a line of the table, with or without its leading "#": the banner that orders
// the measurement groups, the header that lays out the columns, or a result row. Anything else is
// ignored.
func (p *ncclParser) tableLine(trim string) error {
	body := strings.TrimSpace(strings.TrimPrefix(trim, "#"))
	toks := strings.Fields(body)
	if len(toks) == 0 {
		return nil
	}
	if isBanner(toks) {
		// The banner above the header says which measurement comes first.
		p.boundary()
		p.order = bannerOrder(body)
		return nil
	}
	if toks[0] == "size" {
		if l, ok := layoutFromHeader(toks); ok {
			if len(p.cur.n.Rows) > 0 || p.cur.footerSeen {
				p.boundary()
			}
			p.layout, p.haveLayout = l, true
			p.cur.sawTable = true
		}
		return nil
	}
	if strings.HasPrefix(trim, "#") || len(toks) < 5 {
		return nil
	}
	if _, err := strconv.ParseInt(toks[0], 10, 64); err != nil {
		return nil // not a table row (device listing, NCCL INFO lines, ...)
	}
	return p.row(toks)
}

// row reads a result row into the current run (a footer before it starts a new run); a row that
// does not match the header or holds a non-finite value is skipped with a warning.
func (p *ncclParser) row(toks []string) error {
	l, ok := rowLayout(toks, p.layout, p.haveLayout)
	if !ok {
		p.cur.r.warnf("line %d: table row with %d columns does not match the header: skipped", p.lineNo, len(toks))
		return nil
	}
	if p.cur.footerSeen {
		p.boundary()
	}
	cur := p.cur
	if !p.haveLayout {
		cur.guessed = len(toks)
	}
	row, checked, err := parseNCCLRow(toks, l, p.order)
	if err != nil {
		if errors.Is(err, errNonFinite) {
			cur.r.warnf("line %d: %v: row skipped", p.lineNo, err)
			return nil
		}
		return fmt.Errorf("line %d: %w", p.lineNo, err)
	}
	if row.InPlace != nil && row.OutOfPlace.Wrong == nil && row.OutOfPlace == (NCCLMeasure{}) {
		cur.inPlaceOnly++
	}
	cur.anyChecked = cur.anyChecked || checked
	cur.n.Rows = append(cur.n.Rows, row)
	return nil
}

// finish checks what one run holds and reports what is missing.
func (run *ncclRun) finish() *Result {
	r, n := run.r, run.n
	if len(n.Rows) == 0 {
		r.warnf("no result rows found in the nccl-tests table")
	}
	if run.guessed > 0 {
		r.warnf("no table header before the rows: columns read by their count (%d)", run.guessed)
	}
	if run.inPlaceOnly > 0 {
		r.warnf("%d rows have only in-place measurements: their out_of_place values are absent (zero), not measured", run.inPlaceOnly)
	}
	for _, row := range n.Rows {
		for _, m := range []*NCCLMeasure{&row.OutOfPlace, row.InPlace} {
			if m != nil && m.Wrong != nil {
				n.WrongTotal += int(*m.Wrong)
			}
		}
	}
	n.Validated = run.anyChecked
	maxErr, anyErr := 0.0, false
	naSeen := false
	for _, row := range n.Rows {
		for _, m := range []*NCCLMeasure{&row.OutOfPlace, row.InPlace} {
			if m != nil && m.Error != nil {
				anyErr = true
				maxErr = max(maxErr, *m.Error)
			}
			if m != nil && m.Wrong == nil && m.Error == nil && *m != (NCCLMeasure{}) {
				naSeen = true
			}
		}
	}
	switch {
	case anyErr:
		r.Extra = map[string]float64{"max_rel_error": maxErr}
		r.warnf("old nccl-tests format: an \"error\" column (max relative error) instead of #wrong; wrong_total is missing, max_rel_error = %g", maxErr)
	case !run.anyChecked && len(n.Rows) > 0:
		r.warnf("#wrong is N/A on every row: nccl-tests ran without validation (-c 0), correctness not checked")
	case naSeen:
		r.warnf("#wrong is N/A for some measurements (for example in-place of sendrecv): wrong_total counts only the checked ones")
	}
	if n.WrongTotal > 0 {
		r.warnf("nccl-tests found %d wrong elements", n.WrongTotal)
	}
	if !run.avgFound {
		r.setMissing("avg_busbw_gbps")
		if !run.avgBad {
			r.warnf("no \"# Avg bus bandwidth\" value (the run may have been cut short): avg_busbw_gbps is missing")
		}
	}
	if n.AvgBusBWStatus == "FAILED" {
		r.warnf("nccl-tests reported Avg bus bandwidth FAILED (below NCCL_TESTS_MIN_BW)")
	}
	if !run.anyChecked {
		r.setMissing("wrong_total")
	}
	return r
}

// errNonFinite marks a row value such as "nan" or "inf".
var errNonFinite = errors.New("non-finite value")

// parseNCCLRow reads one row; order says, per measurement group, whether it is the in-place one.
func parseNCCLRow(toks []string, l ncclLayout, order []bool) (NCCLRow, bool, error) {
	var row NCCLRow
	var err error
	if row.SizeBytes, err = strconv.ParseInt(toks[l.size], 10, 64); err != nil {
		return row, false, fmt.Errorf("size %q: expected an integer number of bytes", toks[l.size])
	}
	if l.count >= 0 {
		if row.Count, err = strconv.ParseInt(toks[l.count], 10, 64); err != nil {
			return row, false, fmt.Errorf("count %q: expected an integer", toks[l.count])
		}
	}
	if l.typ >= 0 {
		row.Type = toks[l.typ]
	}
	if l.redop >= 0 {
		row.RedOp = toks[l.redop]
	}
	if l.root >= 0 {
		v, err := strconv.Atoi(toks[l.root])
		if err != nil {
			return row, false, fmt.Errorf("root %q: expected an integer", toks[l.root])
		}
		row.Root = &v
	}
	checked := false
	for gi, g := range l.groups {
		if gi > 1 {
			break
		}
		m, groupChecked, err := parseNCCLMeasure(toks, g, l.wrongIsErrorColumn)
		if err != nil {
			return row, false, err
		}
		checked = checked || groupChecked
		inPlace := gi == 1
		if gi < len(order) {
			inPlace = order[gi]
		}
		if inPlace {
			mm := m
			row.InPlace = &mm
		} else {
			row.OutOfPlace = m
		}
	}
	return row, checked, nil
}

// parseNCCLMeasure reads one measurement group of a row: time, algbw and busbw, and #wrong (or,
// with errorColumn, the older max relative error). It reports whether #wrong was checked.
func parseNCCLMeasure(toks []string, g ncclGroup, errorColumn bool) (NCCLMeasure, bool, error) {
	var m NCCLMeasure
	fields := []struct {
		idx  int
		name string
		dst  *float64
	}{{g.time, "time", &m.TimeUs}, {g.algbw, "algbw", &m.AlgBWGBps}, {g.busbw, "busbw", &m.BusBWGBps}}
	for _, f := range fields {
		if f.idx < 0 || f.idx >= len(toks) {
			continue
		}
		v, err := strconv.ParseFloat(toks[f.idx], 64)
		if err != nil {
			if low := strings.ToLower(toks[f.idx]); strings.Contains(low, "nan") || strings.Contains(low, "inf") {
				return m, false, fmt.Errorf("%s is %q: %w", f.name, toks[f.idx], errNonFinite)
			}
			return m, false, fmt.Errorf("%s %q: expected a number", f.name, toks[f.idx])
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return m, false, fmt.Errorf("%s is %q: %w", f.name, toks[f.idx], errNonFinite)
		}
		*f.dst = v
	}
	if g.wrong < 0 || g.wrong >= len(toks) {
		return m, false, nil
	}
	w := toks[g.wrong]
	switch {
	case w == "N/A":
	case errorColumn:
		v, err := strconv.ParseFloat(w, 64)
		if err != nil {
			return m, false, fmt.Errorf("error %q: expected a number or N/A", w)
		}
		m.Error = &v
	default:
		v, err := strconv.ParseInt(w, 10, 64)
		if err != nil {
			return m, false, fmt.Errorf("#wrong %q: expected an integer or N/A", w)
		}
		m.Wrong = &v
		return m, true, nil
	}
	return m, false, nil
}
