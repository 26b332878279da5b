package spec

import "github.com/reckon-ci/reckon/internal/diag"

// Error is one problem found in a spec file, at a position in it: the harness's diagnostic type
// (internal/diag). Its Error method formats it as "file:line:col: field: message"; Code is one of
// the Code* constants below, Field the field's path ("configs[1].name"; empty for
// document-level problems). Warnings about a valid spec (`reckon spec check`) are Errors too,
// with Severity diag.Warning.
type Error = diag.Diagnostic

// ErrorList is every problem found in one spec file, in file order. Parse and Load return it
// (as an error) when the spec is invalid, so that all problems can be fixed in one go.
type ErrorList = diag.List

// The codes of spec's errors: what kind of problem, for tests and machines (docs/spec.md).
const (
	// CodeSyntax: not valid YAML, more than one document, an alias to no anchor, a bad merge key.
	CodeSyntax = "syntax"
	// CodeLimit: the file is over a limit (size, nesting depth, alias expansion).
	CodeLimit = "limit"
	// CodeEmpty: the file holds no spec.
	CodeEmpty = "empty"
	// CodeUnknownField: a key the section does not have.
	CodeUnknownField = "unknown-field"
	// CodeMissingField: a required field is not set.
	CodeMissingField = "missing-field"
	// CodeDuplicate: a key, config, workload or check name given twice.
	CodeDuplicate = "duplicate"
	// CodeType: a value of the wrong YAML type (a string where a number is expected).
	CodeType = "type"
	// CodeValue: a value of the right type that is not allowed (out of range, not one of the
	// choices, badly formed).
	CodeValue = "value"
	// CodeConflict: settings that exclude or contradict each other.
	CodeConflict = "conflict"
	// CodeUnknownName: a reference to a config or workload the spec does not define.
	CodeUnknownName = "unknown-name"
	// CodeUnknownMetric: a metric reckon does not know, or one without a direction where a check
	// needs one.
	CodeUnknownMetric = "unknown-metric"
	// CodeUnmeasured: a metric that no source of this spec (its engine's logs, reckon's
	// workload) produces, so the check could never be judged.
	CodeUnmeasured = "unmeasured-metric"
	// CodeNoPower: a statistical check that could never find a regression.
	CodeNoPower = "no-power"
	// CodeUnsupported: a setting the spec's engine kind would drop or refuse at launch.
	CodeUnsupported = "unsupported"
	// CodeUnreadable: the file cannot be read.
	CodeUnreadable = "unreadable"

	// The codes of warnings (`reckon spec check`): the spec is valid, but may fail or mislead.

	// CodeMissingPath: a file the run will read does not exist relative to the current directory.
	CodeMissingPath = "missing-path"
	// CodeUncalibrated: a numerical check whose bound cannot tell a real error from rounding, or
	// numerics without the under-load pass.
	CodeUncalibrated = "uncalibrated"
	// CodeUnused: a config that no check and no workload uses: it would be launched (and its
	// health judged) for nothing the spec asks about.
	CodeUnused = "unused-config"
)
