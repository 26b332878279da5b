package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/workload"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"inf": 0, "": 0, "Infinity": 0, "2.5": 2.5, "10": 10} {
		got, err := parseRate(in)
		if err != nil || got != want {
			t.Errorf("parseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"0", "-1", "fast", "nan"} {
		if _, err := parseRate(bad); err == nil {
			t.Errorf("parseRate(%q) accepted", bad)
		}
	}
}

// TestImportJSONForNCCL pins the shape `reckon import --json` prints for nccl-tests output.
func TestImportJSONForNCCL(t *testing.T) {
	r, err := workload.ImportFile("../../fixtures/results/nccl-tests-gb200-nvl72.txt")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	if err := enc.Encode(ncclJSON(r)); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Rows []struct {
			SizeBytes  int64 `json:"size_bytes"`
			OutOfPlace struct {
				AlgBW float64 `json:"algbw_gbps"`
				BusBW float64 `json:"busbw_gbps"`
				Wrong *int64  `json:"wrong"`
			} `json:"out_of_place"`
			InPlace *struct {
				BusBW float64 `json:"busbw_gbps"`
				Wrong *int64  `json:"wrong"`
			} `json:"in_place"`
		} `json:"rows"`
		Avg *float64 `json:"avg_busbw_gbps"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != 5 || got.Avg == nil || *got.Avg != 745.53 || got.Rows[0].SizeBytes != 536870912 ||
		got.Rows[0].OutOfPlace.BusBW != 586.06 || got.Rows[0].OutOfPlace.Wrong == nil || got.Rows[0].InPlace == nil || got.Rows[0].InPlace.BusBW != 576.74 {
		t.Errorf("import --json = %s", b.String())
	}
	var sum bytes.Buffer
	printSummary(&sum, r)
	if !strings.Contains(sum.String(), "avg_busbw_gbps") {
		t.Errorf("summary: %s", sum.String())
	}
}
