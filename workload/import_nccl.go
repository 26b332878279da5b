package workload

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// mpiPrefix matches the per-rank prefixes that mpirun --tag-output adds ("[1,0]<stdout>:").
var mpiPrefix = regexp.MustCompile(`^\s*\[\d+,\d+\]<std(?:out|err)>:`)

func looksLikeNCCL(b []byte) bool {
	return bytes.Contains(b, []byte("Avg bus bandwidth")) ||
		(bytes.Contains(b, []byte("out-of-place")) && bytes.Contains(b, []byte("busbw")))
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
	reAvgBus    = regexp.MustCompile(`#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+|nan|inf)\s*(\S*)`)
	reOOB       = regexp.MustCompile(`#\s*Out of bounds values\s*:\s*(\d+)\s*(\S*)`)
	reCollStart = regexp.MustCompile(`#\s*Collective test starting:\s*(\S+)`)
)

// importNCCLText parses nccl-tests stdout (all_reduce_perf and friends).
func importNCCLText(b []byte) (*Result, error) {
	r := &Result{Schema: ResultSchema}
	r.Metadata.Tool = "nccl-tests"
	r.Metadata.SourceFormat = FormatNCCL
	n := &NCCLResult{OutOfBounds: -1}
	r.NCCL = n
	var layout ncclLayout
	haveLayout := false
	sawOutOfPlace := false
	avgFound := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	lineNo := 0
	anyChecked := false
	for sc.Scan() {
		lineNo++
		line := mpiPrefix.ReplaceAllString(sc.Text(), "")
		trim := strings.TrimSpace(line)
		if trim == "" {
			continue
		}
		if m := reCollStart.FindStringSubmatch(trim); m != nil {
			n.Collective = m[1]
			continue
		}
		if m := reAvgBus.FindStringSubmatch(trim); m != nil {
			f, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: Avg bus bandwidth %q is not a number", lineNo, m[1])
			}
			n.AvgBusBWGBps = f
			n.AvgBusBWStatus = m[2]
			avgFound = true
			continue
		}
		if m := reOOB.FindStringSubmatch(trim); m != nil {
			n.OutOfBounds, _ = strconv.Atoi(m[1])
			if m[2] == "FAILED" {
				r.warnf("nccl-tests reported out-of-bounds values: %s", m[1])
			}
			continue
		}
		if strings.HasPrefix(trim, "#") {
			body := strings.TrimSpace(strings.TrimPrefix(trim, "#"))
			if strings.Contains(body, "out-of-place") {
				sawOutOfPlace = true
				continue
			}
			toks := strings.Fields(body)
			if len(toks) > 0 && toks[0] == "size" {
				if l, ok := layoutFromHeader(toks); ok {
					layout, haveLayout = l, true
				}
			}
			continue
		}
		toks := strings.Fields(trim)
		if len(toks) < 5 {
			continue
		}
		if _, err := strconv.ParseInt(toks[0], 10, 64); err != nil {
			continue // not a table row (device listing, NCCL INFO lines, ...)
		}
		l := layout
		if !haveLayout || len(toks) != layout.width {
			g, ok := guessLayout(len(toks))
			if !ok {
				if haveLayout && len(toks) > layout.width {
					// Extra per-iteration columns (-I): the known ones are still in place.
					l = layout
				} else {
					r.warnf("line %d: table row with %d columns does not match the header: skipped", lineNo, len(toks))
					continue
				}
			} else {
				l = g
			}
		}
		row, checked, err := parseNCCLRow(toks, l)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		anyChecked = anyChecked || checked
		n.Rows = append(n.Rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading nccl-tests output: %w", err)
	}
	if len(n.Rows) == 0 {
		if sawOutOfPlace || avgFound {
			r.warnf("no result rows found in the nccl-tests table")
		} else {
			return nil, fmt.Errorf("no nccl-tests table found")
		}
	}
	for _, row := range n.Rows {
		for _, m := range []*NCCLMeasure{&row.OutOfPlace, row.InPlace} {
			if m != nil && m.Wrong != nil {
				n.WrongTotal += int(*m.Wrong)
			}
		}
	}
	n.Validated = anyChecked
	maxErr, anyErr := 0.0, false
	for _, row := range n.Rows {
		for _, m := range []*NCCLMeasure{&row.OutOfPlace, row.InPlace} {
			if m != nil && m.Error != nil {
				anyErr = true
				maxErr = max(maxErr, *m.Error)
			}
		}
	}
	switch {
	case anyErr:
		r.Extra = map[string]float64{"max_rel_error": maxErr}
		r.warnf("old nccl-tests format: an \"error\" column (max relative error) instead of #wrong; wrong_total is missing, max_rel_error = %g", maxErr)
	case !anyChecked && len(n.Rows) > 0:
		r.warnf("#wrong is N/A on every row: nccl-tests ran without validation (-c 0), correctness not checked")
	}
	if n.WrongTotal > 0 {
		r.warnf("nccl-tests found %d wrong elements", n.WrongTotal)
	}
	if !avgFound {
		r.setMissing("avg_busbw_gbps")
		r.warnf("no \"# Avg bus bandwidth\" line (the run may have been cut short): avg_busbw_gbps is missing")
	}
	if n.AvgBusBWStatus == "FAILED" {
		r.warnf("nccl-tests reported Avg bus bandwidth FAILED (below NCCL_TESTS_MIN_BW)")
	}
	if !anyChecked {
		r.setMissing("wrong_total")
	}
	return r, nil
}

func parseNCCLRow(toks []string, l ncclLayout) (NCCLRow, bool, error) {
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
				return row, false, fmt.Errorf("%s %q: expected a number", f.name, toks[f.idx])
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
		if gi == 0 {
			row.OutOfPlace = m
		} else {
			mm := m
			row.InPlace = &mm
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
		if v, ok := intOf(m["size"]); ok {
			row.SizeBytes = int64(v)
		} else {
			return nil, fmt.Errorf("results[%d].size: expected a number of bytes", i)
		}
		if v, ok := intOf(m["count"]); ok {
			row.Count = int64(v)
		}
		row.Type = str(m["type"])
		row.RedOp = str(m["redop"])
		if v, ok := intOf(m["root"]); ok {
			row.Root = &v
		}
		meas := func(v any) *NCCLMeasure {
			mm, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			out := &NCCLMeasure{}
			out.TimeUs, _, _ = num(mm["time"])
			out.AlgBWGBps, _, _ = num(mm["alg_bw"])
			out.BusBWGBps, _, _ = num(mm["bus_bw"])
			if w, ok := intOf(mm["nwrong"]); ok {
				w64 := int64(w)
				out.Wrong = &w64
				anyChecked = true
				n.WrongTotal += w
			}
			return out
		}
		if op := meas(m["out_of_place"]); op != nil {
			row.OutOfPlace = *op
		}
		row.InPlace = meas(m["in_place"])
		n.Rows = append(n.Rows, row)
	}
	n.Validated = anyChecked
	if ab, ok := o["average_bus_bandwidth"].(map[string]any); ok {
		if f, ok, _ := num(ab["bandwidth"]); ok {
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
		if v, ok := intOf(ob["count"]); ok {
			n.OutOfBounds = v
		}
	}
	if !anyChecked {
		r.setMissing("wrong_total")
	}
	return r, nil
}
