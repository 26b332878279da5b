package suites

import (
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/engine"
	"github.com/reckon-ci/reckon/internal/metric"
)

// TestEngineMetricsMatchRegistry pins the metric registry's engine report metrics
// (internal/metric) to the numeric fields of engine.Report and to the adapters' lists: every
// metric the registry says an engine reports is a Report field that some adapter reports, and
// every numeric Report field is registered.
func TestEngineMetricsMatchRegistry(t *testing.T) {
	var fields []string
	rt := reflect.TypeOf(engine.Report{})
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		typ := f.Type
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Float64 && typ.Kind() != reflect.Int64 && typ.Kind() != reflect.Int {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fields = append(fields, name)
	}
	registered := metric.Names(metric.Produced(metric.EngineReport))
	sort.Strings(fields)
	sort.Strings(registered)
	if !slices.Equal(fields, registered) {
		t.Errorf("engine.Report's numeric fields and the registry's engine report metrics differ:\nReport:   %v\nregistry: %v", fields, registered)
	}
	var reported []string
	for _, kind := range []string{"sglang", "vllm"} {
		m, _ := ReportedMetrics(kind)
		for _, name := range m {
			if !slices.Contains(reported, name) {
				reported = append(reported, name)
			}
		}
	}
	sort.Strings(reported)
	if !slices.Equal(reported, registered) {
		t.Errorf("the adapters' reported metrics and the registry's engine report metrics differ:\nadapters: %v\nregistry: %v", reported, registered)
	}
}
