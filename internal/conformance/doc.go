// Package conformance holds no code: its tests run reckon's readers over the conformance corpus
// (fixtures/conformance), the real response bodies, stream chunks, log excerpts and profiler
// traces of SGLang and vLLM recorded from the engines' docs CI output and issue threads, each
// with a provenance file (NAME.source). Every vector states what reckon must read from it; a
// vector without a provenance file or without an expectation fails the corpus walk. The
// persona tests start each reference-engine persona (refengine --engine-version V) and compare
// the JSON shapes of its answers with the real vectors of the matching release.
//
// docs/conformance.md lists the vectors and says how to add one.
package conformance
