package spec

import (
	"math"
	"strings"
)

// AllReduceProbeParams are the fields of an allreduce_probe check: an op-level allreduce probe
// JSON file (wire.AllReduceProbe) judged against per-dtype tolerances. It compares no config of
// the run.
type AllReduceProbeParams struct {
	// File is the probe JSON file (relative to the spec file once loaded).
	File string `json:"file,omitempty"`
	// Algorithms are the algorithms judged; empty means all but the reference.
	Algorithms []string `json:"algorithms,omitempty"`
	// MaxAbsErr and MaxRelErr are per-dtype tolerances against the reference, keyed "float32",
	// "bfloat16", "float16"; dtypes not listed use the gate's defaults. Integer inputs must
	// always be exact.
	MaxAbsErr map[string]float64 `json:"max_abs_err,omitempty"`
	MaxRelErr map[string]float64 `json:"max_rel_err,omitempty"`
}

func decodeAllReduceProbe(b *builder, m *mapping, _ *Spec) Params {
	p := &AllReduceProbeParams{}
	p.File, _ = m.reqStr("file", "the probe JSON file")
	p.Algorithms = m.strList("algorithms", false)
	p.MaxAbsErr = b.dtypeMap(m, "max_abs_err")
	p.MaxRelErr = b.dtypeMap(m, "max_rel_err")
	return p
}

// Scope: a probe file is judged once per run, outside every config's container.
func (p *AllReduceProbeParams) Scope() Scope { return ScopeCross }

// ConfigNames: a probe file involves no config of the run.
func (p *AllReduceProbeParams) ConfigNames() []string { return nil }

func (p *AllReduceProbeParams) link(*linker, *Check)     {}
func (p *AllReduceProbeParams) validate(*linker, *Check) {}

// name: "allreduce_probe probe.json [custom]".
func (p *AllReduceProbeParams) name(CheckKind) string {
	s := "allreduce_probe " + p.File
	if len(p.Algorithms) > 0 {
		s += " [" + strings.Join(p.Algorithms, ",") + "]"
	}
	return s
}

// dtypeNames maps accepted dtype spellings to the probe's names.
var dtypeNames = map[string]string{
	"float32": "float32", "fp32": "float32", "f32": "float32",
	"bfloat16": "bfloat16", "bf16": "bfloat16",
	"float16": "float16", "fp16": "float16", "f16": "float16", "half": "float16",
}

func (b *builder) dtypeMap(m *mapping, key string) map[string]float64 {
	v, ok := m.get(key)
	if !ok {
		return nil
	}
	sub := b.mapping(v, m.field(key))
	if sub == nil {
		return nil
	}
	out := map[string]float64{}
	for _, e := range sub.entries {
		dt, ok := dtypeNames[strings.ToLower(e.key)]
		if !ok {
			b.errorc(CodeValue, e.keyN, sub.path, "unknown dtype %q (expected float32, bfloat16 or float16)", e.key)
			sub.known = append(sub.known, e.key)
			continue
		}
		if f := sub.numberIn(e.key, 0, math.MaxFloat64, "a tolerance >= 0"); f != nil {
			out[dt] = *f
		}
	}
	return out
}

// workloadFor: an allreduce probe check reads a probe file and runs no workload.
func (p *AllReduceProbeParams) workloadFor(string) string { return "" }
