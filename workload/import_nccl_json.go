// import_nccl_json.go holds the importer of the JSON file that nccl-tests writes with -J.

package workload

import (
	"fmt"
)

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
		row, checked, err := ncclJSONRow(i, x, n)
		if err != nil {
			return nil, err
		}
		anyChecked = anyChecked || checked
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

// ncclJSONRow reads results[i], one row of the table; checked says the row carried a count of
// wrong values (which it adds to n.WrongTotal).
func ncclJSONRow(i int, x any, n *NCCLResult) (row NCCLRow, checked bool, err error) {
	m, ok := x.(map[string]any)
	if !ok {
		return row, false, fmt.Errorf("results[%d]: expected an object", i)
	}
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
		return row, false, fmt.Errorf("results[%d].size: expected a number of bytes", i)
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
			checked = true
			n.WrongTotal += w
		}
		return out
	}
	if op := meas("out_of_place", m["out_of_place"]); op != nil {
		row.OutOfPlace = *op
	}
	row.InPlace = meas("in_place", m["in_place"])
	if ferr != nil {
		return row, false, ferr
	}
	return row, checked, nil
}
