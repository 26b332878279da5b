package collective

import (
	"io"

	"github.com/reckon-ci/reckon/wire"
)

// The strict reader of the reckon.allreduce-probe/v1 contract lives in package wire
// (wire/probecheck.go), shared with the harness; these wrappers keep this package's callers
// unchanged.

// ReadProbe reads and validates an allreduce probe file (any source: this package's probe, the
// torch probe in ci/probes) with wire.ReadAllReduceProbe. Unknown fields are rejected so that a
// misspelt field is not silently ignored; errors name the file, line, JSON path and what was
// expected (a *wire.ProbeError).
func ReadProbe(path string) (*wire.AllReduceProbe, error) {
	return wire.ReadAllReduceProbe(path)
}

// DecodeProbe decodes one probe JSON document strictly and validates it
// (wire.DecodeAllReduceProbe).
func DecodeProbe(r io.Reader) (*wire.AllReduceProbe, error) {
	return wire.DecodeAllReduceProbe(r)
}

// ValidateProbe checks p against the reckon.allreduce-probe/v1 contract
// (docs/allreduce-probe.md; wire.AllReduceProbe.Validate) and returns every problem found, each
// naming its JSON path.
func ValidateProbe(p *wire.AllReduceProbe) error {
	return p.Validate()
}
