package workload

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// Source formats recognised by ImportFile (Result.Metadata.SourceFormat).
const (
	FormatReckon   = "reckon"
	FormatVLLM     = "vllm-bench-serve"
	FormatSGLang   = "sglang-bench-serving"
	FormatAIPerf   = "aiperf"
	FormatGenAI    = "genai-perf"
	FormatNCCL     = "nccl-tests"
	FormatNCCLJSON = "nccl-tests-json"
)

// ImportFile reads a result file of reckon, vLLM bench serve (JSON, or JSONL with
// --append-result), SGLang bench_serving (JSONL), GenAI-Perf/AIPerf (aggregate JSON), a log with
// the printed "Serving Benchmark Result" summary of vLLM or SGLang, or nccl-tests (text output or
// -J JSON), detecting the format from the content. A file with several results
// (JSONL) gives the last one, with a warning; ImportAll gives them all.
func ImportFile(path string) (*Result, error) {
	return ImportFileWith(path, ImportOptions{})
}

// ImportOptions say what a result file does not. ToolVersion is the version of the tool that
// wrote it (for example "0.25.1"), needed where the tool's definitions changed between versions
// and its files do not record the version (vLLM's max_concurrent_requests: the busiest whole
// second up to 0.28, the exact peak after); it is recorded in each result's
// metadata.semantics with that basis.
type ImportOptions struct {
	ToolVersion string
}

// ImportFileWith is ImportFile with options.
func ImportFileWith(path string, opts ImportOptions) (*Result, error) {
	rs, err := ImportAllWith(path, opts)
	if err != nil {
		return nil, err
	}
	r := rs[len(rs)-1]
	if len(rs) > 1 {
		r.warnf("%s holds %d results; this is the last one", path, len(rs))
	}
	return r, nil
}

// ImportAll reads every result of a file (see ImportFile).
func ImportAll(path string) ([]*Result, error) {
	return ImportAllWith(path, ImportOptions{})
}

// ImportAllWith is ImportAll with options. A file larger than MaxImportBytes is refused
// before it is read; JSON Lines are decoded one record at a time, so that memory follows the
// largest record and the results, not the file.
func ImportAllWith(path string, opts ImportOptions) ([]*Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > MaxImportBytes {
		return nil, fmt.Errorf("import %s: %d MiB, larger than the %d MiB a result file may have", path, st.Size()>>20, MaxImportBytes>>20)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxImportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	if len(data) > MaxImportBytes {
		return nil, fmt.Errorf("import %s: larger than the %d MiB a result file may have", path, MaxImportBytes>>20)
	}
	rs, err := ImportWith(data, filepath.Base(path), opts)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	for _, r := range rs {
		r.Metadata.SourceFile = path
	}
	labelRuns(rs)
	return rs, nil
}

// labelRuns labels each result of a file with several (SGLang's appended JSONL, vLLM
// --append-result, a sweep summary) by its place in the file and its load: label "run" =
// "N/M request_rate=R max_concurrency=C", so that every record stays its own trial and a reader
// sees which load it measured.
func labelRuns(rs []*Result) {
	if len(rs) < 2 {
		return
	}
	for i, r := range rs {
		w := r.Metadata.Workload
		rate := "inf"
		if w.RequestRate > 0 {
			rate = strconv.FormatFloat(w.RequestRate, 'g', -1, 64)
		}
		if r.Metadata.Labels["request_rate"] == "trace" {
			rate = "trace"
		}
		run := fmt.Sprintf("%d/%d request_rate=%s", i+1, len(rs), rate)
		if d := r.Metadata.Labels["dataset_name"]; d != "" {
			run += " dataset=" + d
		}
		if w.MaxConcurrency > 0 {
			run += fmt.Sprintf(" max_concurrency=%d", w.MaxConcurrency)
		}
		if r.Metadata.Labels == nil {
			r.Metadata.Labels = map[string]string{}
		}
		r.Metadata.Labels["run"] = run
	}
}

// Import parses the content of a result file; name (the file's base name) only helps to tell
// GenAI-Perf from AIPerf.
func Import(data []byte, name string) ([]*Result, error) {
	return ImportWith(data, name, ImportOptions{})
}

// ImportWith is Import with options.
func ImportWith(data []byte, name string, opts ImportOptions) ([]*Result, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("empty file")
	}
	if looksLikeConsole(trimmed) && !looksLikeNCCL(trimmed) {
		return checkResults(importConsole(trimmed, opts))
	}
	if trimmed[0] != '{' && trimmed[0] != '[' || looksLikeNCCL(trimmed) {
		if looksLikeNCCL(trimmed) {
			return checkResults(importNCCLText(trimmed))
		}
		return nil, fmt.Errorf("unrecognised format: expected JSON (vLLM, GenAI-Perf/AIPerf, reckon), JSONL (SGLang, vLLM --append-result), a printed \"Serving Benchmark Result\" summary or nccl-tests text output")
	}
	if len(trimmed) > MaxImportBytes {
		return nil, fmt.Errorf("larger than the %d MiB a result file may have", MaxImportBytes>>20)
	}
	ji := &jsonImport{name: name, opts: opts}
	if isJSONLines(trimmed) {
		return ji.lines(trimmed)
	}
	return ji.document(trimmed)
}

// jsonImport converts the records of a JSON or JSON Lines file into results, in file order.
type jsonImport struct {
	name string // the file's base name
	opts ImportOptions
	out  []*Result
}

// add converts one decoded object (where: the record it came from, for error messages).
func (ji *jsonImport) add(o map[string]any, where string) error {
	if len(ji.out) >= MaxImportRecords {
		return fmt.Errorf("%s: more than %d results in one file", where, MaxImportRecords)
	}
	r, err := importObject(o, ji.name, ji.opts)
	if err != nil {
		if where != "" {
			return fmt.Errorf("%s: %w", where, err)
		}
		return err
	}
	ji.out = append(ji.out, r)
	return nil
}

// lines imports JSON Lines: one record decoded, converted and dropped at a time.
func (ji *jsonImport) lines(trimmed []byte) ([]*Result, error) {
	lineNo := 0
	for rest := trimmed; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		lineNo++
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		where := fmt.Sprintf("line %d", lineNo)
		clean, err := sanitizeNonFinite(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		o, err := decodeObject(clean)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if err := ji.add(o, where); err != nil {
			return nil, err
		}
	}
	return ji.out, nil
}

// document imports one JSON document, or an array of result objects (vllm bench sweep's
// summary.json). Input that is neither is reported at the first line that is not an object.
func (ji *jsonImport) document(trimmed []byte) ([]*Result, error) {
	clean, err := sanitizeNonFinite(trimmed)
	if err != nil {
		return nil, err
	}
	if doc, err := decodeObject(clean); err == nil {
		if err := ji.add(doc, ""); err != nil {
			return nil, err
		}
	} else if arr, isArr := decodeArray(clean); isArr {
		if err := ji.array(arr); err != nil {
			return nil, err
		}
	} else {
		return nil, firstBadLine(clean, err)
	}
	if len(ji.out) == 0 {
		return nil, fmt.Errorf("no result found")
	}
	return ji.out, nil
}

// array imports a JSON array whose every element must be a result object, dropping each
// element once converted.
func (ji *jsonImport) array(arr []any) error {
	if len(arr) == 0 {
		return fmt.Errorf("an empty JSON array holds no result")
	}
	for i, x := range arr {
		o, ok := x.(map[string]any)
		if !ok {
			return fmt.Errorf("a JSON array is not a known result format unless every element is a result object; element %d is %T", i, x)
		}
		if err := ji.add(o, fmt.Sprintf("element %d", i)); err != nil {
			return err
		}
		arr[i] = nil
	}
	return nil
}

// firstBadLine is the error of input that is not one JSON document: the first line that is not
// an object says where, else line 1 with the document's error docErr.
func firstBadLine(clean []byte, docErr error) error {
	lineNo := 0
	for _, line := range bytes.Split(clean, []byte("\n")) {
		lineNo++
		if line = bytes.TrimSpace(line); len(line) == 0 {
			continue
		}
		if _, err := decodeObject(line); err != nil {
			return fmt.Errorf("line %d: %w", lineNo, err)
		}
	}
	return fmt.Errorf("line 1: %w", docErr)
}

// checkResults checks the results of a text format (checkResult), naming the run of the file
// that holds a value out of its range.
func checkResults(rs []*Result, err error) ([]*Result, error) {
	if err != nil {
		return nil, err
	}
	for i, r := range rs {
		if err := checkResult(r); err != nil {
			if len(rs) > 1 {
				return nil, fmt.Errorf("run %d: %w", i+1, err)
			}
			return nil, err
		}
	}
	return rs, nil
}
