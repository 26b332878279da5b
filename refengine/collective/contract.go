package collective

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/reckon-ci/reckon/wire"
)

// knownDTypes maps the contract's dtype names to their element size in bytes.
var knownDTypes = map[string]int64{"float32": 4, "bfloat16": 2, "float16": 2}

// ReadProbe reads and validates an allreduce probe file (any source: this package's probe, the
// torch probe in ci/probes). Unknown fields are rejected so that a misspelt field is not silently
// ignored; errors name the file and the offending field.
func ReadProbe(path string) (*wire.AllReduceProbe, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading allreduce probe: %w", err)
	}
	p, err := DecodeProbe(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// DecodeProbe decodes one probe JSON document strictly and validates it with ValidateProbe.
func DecodeProbe(r io.Reader) (*wire.AllReduceProbe, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var p wire.AllReduceProbe
	if err := dec.Decode(&p); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("not valid JSON at byte %d: %w", se.Offset, err)
		case errors.As(err, &te):
			return nil, fmt.Errorf("field %q: expected a %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return nil, fmt.Errorf("decoding allreduce probe: %w", err)
	}
	if dec.More() {
		return nil, errors.New("trailing data after the probe's JSON object")
	}
	if err := ValidateProbe(&p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ValidateProbe checks p against the reckon.allreduce-probe/v1 contract (docs/allreduce-probe.md):
// schema, source, world size, a reference algorithm present in every case, consistent sizes,
// known dtypes and input kinds, finite non-negative errors, and pairs that name algorithms of
// their case. It returns every problem found, each naming its JSON path.
func ValidateProbe(p *wire.AllReduceProbe) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p.Schema != wire.AllReduceProbeSchema {
		bad("schema: %q, expected %q", p.Schema, wire.AllReduceProbeSchema)
	}
	if p.Source == "" {
		bad("source: missing (e.g. %q or %q)", ProbeSource, "torch.distributed")
	}
	if p.WorldSize < 2 {
		bad("world_size: %d, expected at least 2", p.WorldSize)
	}
	if p.Reference == "" {
		bad("reference: missing: name the algorithm the others are judged against")
	}
	if len(p.Results) == 0 {
		bad("results: empty, expected at least one case")
	}
	for i, c := range p.Results {
		at := fmt.Sprintf("results[%d]", i)
		size, ok := knownDTypes[c.DType]
		if !ok {
			bad("%s.dtype: %q, expected float32, bfloat16 or float16", at, c.DType)
		} else if c.SizeBytes <= 0 || c.Elements <= 0 || c.Elements*size != c.SizeBytes {
			bad("%s: size_bytes %d and elements %d do not match %s (%d bytes per element)", at, c.SizeBytes, c.Elements, c.DType, size)
		}
		if c.Inputs != "random" && c.Inputs != "integer" {
			bad("%s.inputs: %q, expected random or integer", at, c.Inputs)
		}
		names := map[string]bool{}
		for j, a := range c.Algorithms {
			aat := fmt.Sprintf("%s.algorithms[%d]", at, j)
			if a.Name == "" {
				bad("%s.name: missing", aat)
			}
			if names[a.Name] {
				bad("%s.name: %q appears twice in this case", aat, a.Name)
			}
			names[a.Name] = true
			if a.Skipped != "" {
				continue
			}
			checkMetric(bad, aat+".max_abs_err", a.MaxAbsErr)
			checkMetric(bad, aat+".max_rel_err", a.MaxRelErr)
			if a.MedianUs != nil {
				checkMetric(bad, aat+".median_us", *a.MedianUs)
			}
			if !a.Exact && a.MaxAbsErr == 0 {
				bad("%s: exact is false but max_abs_err is 0 (an output equal to the float64 reference is exact)", aat)
			}
		}
		if p.Reference != "" && !names[p.Reference] {
			bad("%s: the reference algorithm %q is not among this case's algorithms", at, p.Reference)
		}
		for j, pr := range c.Pairs {
			pat := fmt.Sprintf("%s.pairs[%d]", at, j)
			if !names[pr.A] || !names[pr.B] || pr.A == pr.B {
				bad("%s: a=%q b=%q: expected two different algorithms of this case", pat, pr.A, pr.B)
			}
			checkMetric(bad, pat+".max_abs_diff", pr.MaxAbsDiff)
			checkMetric(bad, pat+".max_rel_diff", pr.MaxRelDiff)
			if pr.Identical && pr.MaxAbsDiff != 0 {
				bad("%s: identical is true but max_abs_diff is %g", pat, pr.MaxAbsDiff)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("allreduce probe does not follow %s: %w", wire.AllReduceProbeSchema, errors.Join(errs...))
	}
	return nil
}

func checkMetric(bad func(string, ...any), at string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		bad("%s: %v, expected a finite non-negative number", at, v)
	}
}
