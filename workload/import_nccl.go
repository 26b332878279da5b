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

// ncclGroup is where one measurement's columns are in a table row.
type ncclGroup struct{ time, algbw, busbw, wrong int }

// ncclLayout is the column layout of a table, read from its header or guessed from the row width.
type ncclLayout struct {
	width              int
	size, count, typ   int
	redop, root        int // -1 when absent
	groups             []ncclGroup
	wrongIsErrorColumn bool // older versions print a max relative error instead of #wrong
}

func layoutFromHeader(tokens []string) (ncclLayout, bool) {
	l := ncclLayout{width: len(tokens), size: -1, count: -1, typ: -1, redop: -1, root: -1}
	var g *ncclGroup
	for i, t := range tokens {
		switch strings.ToLower(t) {
		case "size":
			l.size = i
		case "count":
			l.count = i
		case "type":
			l.typ = i
		case "redop":
			l.redop = i
		case "root":
			l.root = i
		case "time":
			l.groups = append(l.groups, ncclGroup{time: i, algbw: -1, busbw: -1, wrong: -1})
			g = &l.groups[len(l.groups)-1]
		case "algbw":
			if g != nil {
				g.algbw = i
			}
		case "busbw":
			if g != nil {
				g.busbw = i
			}
		case "#wrong", "wrong":
			if g != nil {
				g.wrong = i
			}
		case "error":
			if g != nil {
				g.wrong = i
				l.wrongIsErrorColumn = true
			}
		}
	}
	ok := l.size >= 0 && len(l.groups) > 0 && l.groups[0].busbw >= 0
	return l, ok
}

// guessLayout handles a table whose header was lost: 13 columns = current format (redop, root,
// #wrong), 12 = older format (redop, error column), 11 = oldest format (no redop, error column).
func guessLayout(n int) (ncclLayout, bool) {
	switch n {
	case 13:
		return ncclLayout{width: 13, size: 0, count: 1, typ: 2, redop: 3, root: 4, groups: []ncclGroup{{5, 6, 7, 8}, {9, 10, 11, 12}}}, true
	case 12:
		return ncclLayout{width: 12, size: 0, count: 1, typ: 2, redop: 3, root: -1, groups: []ncclGroup{{4, 5, 6, 7}, {8, 9, 10, 11}}, wrongIsErrorColumn: true}, true
	case 11:
		return ncclLayout{width: 11, size: 0, count: 1, typ: 2, redop: -1, root: -1, groups: []ncclGroup{{3, 4, 5, 6}, {7, 8, 9, 10}}, wrongIsErrorColumn: true}, true
	}
	return ncclLayout{}, false
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
	var runs []*ncclRun
	cur := newNCCLRun()
	var layout ncclLayout
	haveLayout := false
	order := []bool{false, true} // per measurement group: in-place?
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	lineNo := 0
	// A table header, a banner or a "Collective test starting" after rows or a footer starts a
	// new run.
	boundary := func() {
		if len(cur.n.Rows) > 0 || cur.footerSeen {
			runs = append(runs, cur)
			cur = newNCCLRun()
			haveLayout = false
			order = []bool{false, true}
		}
	}
	for sc.Scan() {
		lineNo++
		if len(runs) >= MaxImportRecords {
			return nil, fmt.Errorf("line %d: more than %d nccl-tests runs in one file", lineNo, MaxImportRecords)
		}
		trim := strings.TrimSpace(cleanNCCLLine(sc.Text()))
		if trim == "" {
			continue
		}
		if m := reTestsVer.FindStringSubmatch(trim); m != nil {
			boundary()
			cur.r.Metadata.ToolVersion = m[1]
			continue
		}
		if m := reNCCLVer.FindStringSubmatch(trim); m != nil && cur.r.Metadata.Labels["nccl_version"] == "" {
			cur.r.Metadata.labels()["nccl_version"] = m[1]
		}
		if reNThread.MatchString(trim) {
			boundary() // the first line of every run's output
		}
		if m := reCollStart.FindStringSubmatch(trim); m != nil {
			boundary()
			cur.n.Collective = m[1]
			continue
		}
		if m := reAvgBus.FindStringSubmatch(trim); m != nil {
			f, err := strconv.ParseFloat(m[1], 64)
			switch {
			case err != nil && !strings.Contains(strings.ToLower(m[1]), "nan") && !strings.Contains(strings.ToLower(m[1]), "inf"):
				return nil, fmt.Errorf("line %d: Avg bus bandwidth %q is not a number", lineNo, m[1])
			case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
				cur.r.warnf("line %d: Avg bus bandwidth is %s: avg_busbw_gbps is missing", lineNo, m[1])
				cur.avgBad = true
			case f < 0 || f > domain.MaxMagnitude:
				return nil, fmt.Errorf("line %d: Avg bus bandwidth %s is outside [0, %g]", lineNo, m[1], float64(domain.MaxMagnitude))
			default:
				cur.n.AvgBusBWGBps = f
				cur.avgFound = true
			}
			cur.n.AvgBusBWStatus = m[2]
			cur.footerSeen = true
			continue
		}
		if m := reOOB.FindStringSubmatch(trim); m != nil {
			oob, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil || oob > MaxImportCount {
				return nil, fmt.Errorf("line %d: Out of bounds values %q: expected a count in [0, %d]", lineNo, m[1], int64(MaxImportCount))
			}
			cur.n.OutOfBounds = int(oob)
			if m[2] == "FAILED" {
				cur.r.warnf("nccl-tests reported out-of-bounds values: %s", m[1])
			}
			cur.footerSeen = true
			continue
		}
		body := strings.TrimSpace(strings.TrimPrefix(trim, "#"))
		toks := strings.Fields(body)
		if len(toks) == 0 {
			continue
		}
		if isBanner(toks) {
			// The banner above the header says which measurement comes first.
			boundary()
			order = bannerOrder(body)
			continue
		}
		if toks[0] == "size" {
			if l, ok := layoutFromHeader(toks); ok {
				if len(cur.n.Rows) > 0 || cur.footerSeen {
					boundary()
				}
				layout, haveLayout = l, true
				cur.sawTable = true
			}
			continue
		}
		if strings.HasPrefix(trim, "#") || len(toks) < 5 {
			continue
		}
		if _, err := strconv.ParseInt(toks[0], 10, 64); err != nil {
			continue // not a table row (device listing, NCCL INFO lines, ...)
		}
		l, ok := rowLayout(toks, layout, haveLayout)
		if !ok {
			cur.r.warnf("line %d: table row with %d columns does not match the header: skipped", lineNo, len(toks))
			continue
		}
		if cur.footerSeen {
			boundary()
		}
		if !haveLayout {
			cur.guessed = len(toks)
		}
		row, checked, err := parseNCCLRow(toks, l, order)
		if err != nil {
			if errors.Is(err, errNonFinite) {
				cur.r.warnf("line %d: %v: row skipped", lineNo, err)
				continue
			}
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		if row.InPlace != nil && row.OutOfPlace.Wrong == nil && row.OutOfPlace == (NCCLMeasure{}) {
			cur.inPlaceOnly++
		}
		cur.anyChecked = cur.anyChecked || checked
		cur.n.Rows = append(cur.n.Rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading nccl-tests output: %w", err)
	}
	runs = append(runs, cur)
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

// isBanner tells the "out-of-place  in-place" line above a table header.
func isBanner(toks []string) bool {
	for _, t := range toks {
		if t != "out-of-place" && t != "in-place" {
			return false
		}
	}
	return true
}

// bannerOrder reads the "out-of-place  in-place" banner: for each measurement group in the
// table, whether it is the in-place one.
func bannerOrder(body string) []bool {
	oop := strings.Index(body, "out-of-place")
	loc := reInPlace.FindStringIndex(body)
	ip := -1
	if loc != nil {
		ip = loc[1] - len("in-place")
	}
	switch {
	case oop >= 0 && ip >= 0 && ip < oop:
		return []bool{true, false}
	case oop < 0 && ip >= 0:
		return []bool{true}
	case oop >= 0 && ip < 0:
		return []bool{false}
	}
	return []bool{false, true}
}

// rowLayout picks the column layout of one row: the header's, the header's without an empty
// redop column (old alltoall), the header's first groups when the row has fewer measurements,
// or a guess from the width when there was no header.
func rowLayout(toks []string, layout ncclLayout, haveLayout bool) (ncclLayout, bool) {
	if !haveLayout {
		return guessLayout(len(toks))
	}
	if len(toks) >= layout.width {
		return layout, true // equal, or extra per-iteration columns (-I) after the known ones
	}
	l := layout
	if l.redop >= 0 && l.redop < len(toks) {
		if _, err := strconv.ParseFloat(toks[l.redop], 64); err == nil {
			// No reduction operation printed (old alltoall): the columns after it shift left.
			l = l.without(l.redop)
		}
	}
	if len(toks) >= l.width {
		return l, true
	}
	var groups []ncclGroup
	for _, g := range l.groups {
		if g.busbw >= 0 && g.busbw < len(toks) && max(g.time, g.algbw, g.wrong) < len(toks) {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 {
		return ncclLayout{}, false
	}
	l.groups = groups
	l.width = len(toks)
	return l, true
}

// without returns the layout with column i removed.
func (l ncclLayout) without(i int) ncclLayout {
	shift := func(c int) int {
		switch {
		case c == i:
			return -1
		case c > i:
			return c - 1
		}
		return c
	}
	out := l
	out.width--
	out.size, out.count, out.typ, out.redop, out.root = shift(l.size), shift(l.count), shift(l.typ), shift(l.redop), shift(l.root)
	out.groups = make([]ncclGroup, len(l.groups))
	for k, g := range l.groups {
		out.groups[k] = ncclGroup{shift(g.time), shift(g.algbw), shift(g.busbw), shift(g.wrong)}
	}
	return out
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
					return row, false, fmt.Errorf("%s is %q: %w", f.name, toks[f.idx], errNonFinite)
				}
				return row, false, fmt.Errorf("%s %q: expected a number", f.name, toks[f.idx])
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return row, false, fmt.Errorf("%s is %q: %w", f.name, toks[f.idx], errNonFinite)
			}
			*f.dst = v
		}
		if g.wrong >= 0 && g.wrong < len(toks) {
			w := toks[g.wrong]
			switch {
			case w == "N/A":
			case l.wrongIsErrorColumn:
				v, err := strconv.ParseFloat(w, 64)
				if err != nil {
					return row, false, fmt.Errorf("error %q: expected a number or N/A", w)
				}
				m.Error = &v
			default:
				v, err := strconv.ParseInt(w, 10, 64)
				if err != nil {
					return row, false, fmt.Errorf("#wrong %q: expected an integer or N/A", w)
				}
				m.Wrong = &v
				checked = true
			}
		}
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

// importNCCLJSON reads the JSON file of nccl-tests -J.
func importNCCLJSON(o map[string]any) (*Result, error) {
	r := &Result{Schema: ResultSchema}
	r.Metadata.Tool = "nccl-tests"
	r.Metadata.SourceFormat = FormatNCCLJSON
	n := &NCCLResult{OutOfBounds: -1}
	r.NCCL = n
	results, _ := o["results"].([]any)
	anyChecked := false
	for i, x := range results {
		m, ok := x.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("results[%d]: expected an object", i)
		}
		var row NCCLRow
		var ferr error
		cnt := func(field string, v any, max int64) (int, bool) {
			n, ok, err := countOf(v, max)
			if err != nil && ferr == nil {
				ferr = fmt.Errorf("results[%d].%s: %w", i, field, err)
			}
			return n, ok
		}
		if v, ok := cnt("size", m["size"], MaxImportCount); ok {
			row.SizeBytes = int64(v)
		} else if ferr == nil {
			return nil, fmt.Errorf("results[%d].size: expected a number of bytes", i)
		}
		if v, ok := cnt("count", m["count"], MaxImportCount); ok {
			row.Count = int64(v)
		}
		row.Type = str(m["type"])
		row.RedOp = str(m["redop"])
		if f, ok, _ := num(m["root"]); ok && f == -1 {
			v := -1 // no root (all_reduce)
			row.Root = &v
		} else if v, ok := cnt("root", m["root"], MaxImportCount); ok {
			row.Root = &v
		}
		meas := func(place string, v any) *NCCLMeasure {
			mm, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			out := &NCCLMeasure{}
			for _, f := range []struct {
				key string
				dst *float64
			}{{"time", &out.TimeUs}, {"alg_bw", &out.AlgBWGBps}, {"bus_bw", &out.BusBWGBps}} {
				x, _, err := nonNegative(mm[f.key])
				if err != nil && ferr == nil {
					ferr = fmt.Errorf("results[%d].%s.%s: %w", i, place, f.key, err)
				}
				*f.dst = x
			}
			if w, ok := cnt(place+".nwrong", mm["nwrong"], MaxImportCount); ok {
				w64 := int64(w)
				out.Wrong = &w64
				anyChecked = true
				n.WrongTotal += w
			}
			return out
		}
		if op := meas("out_of_place", m["out_of_place"]); op != nil {
			row.OutOfPlace = *op
		}
		row.InPlace = meas("in_place", m["in_place"])
		if ferr != nil {
			return nil, ferr
		}
		n.Rows = append(n.Rows, row)
	}
	n.Validated = anyChecked
	if ab, ok := o["average_bus_bandwidth"].(map[string]any); ok {
		f, ok, err := nonNegative(ab["bandwidth"])
		if err != nil {
			return nil, fmt.Errorf("average_bus_bandwidth.bandwidth: %w", err)
		}
		if ok {
			n.AvgBusBWGBps = f
		} else {
			r.setMissing("avg_busbw_gbps")
		}
		switch v := ab["okay"].(type) {
		case bool:
			if v {
				n.AvgBusBWStatus = "OK"
			} else {
				n.AvgBusBWStatus = "FAILED"
			}
		case string:
			n.AvgBusBWStatus = v
		}
	} else {
		r.setMissing("avg_busbw_gbps")
	}
	if ob, ok := o["out_of_bounds"].(map[string]any); ok {
		v, ok, err := countOf(ob["count"], MaxImportCount)
		if err != nil {
			return nil, fmt.Errorf("out_of_bounds.count: %w", err)
		}
		if ok {
			n.OutOfBounds = v
		}
	}
	if !anyChecked {
		r.setMissing("wrong_total")
	}
	return r, nil
}
