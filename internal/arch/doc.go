// Package arch holds no code: its test (arch_test.go) loads the import graph of every package
// with `go list` and fails when an import breaks the arrows of docs/design.md.
package arch
