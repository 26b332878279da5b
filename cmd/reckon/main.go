// Command reckon is the regression test harness and CI gate for LLM serving engines.
//
// Each subcommand lives in its own file and registers itself on the root command in an init
// function, so that subcommands can be added without touching this file.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitError carries a process exit code out of a subcommand. Code 1 means "the gate (or a
// comparison) found a regression"; code 2 means bad input or usage; 3 means an infrastructure error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// withExitCode wraps err so that main exits with code. A nil err with a non-zero code exits
// quietly (the command has already printed its verdict).
func withExitCode(code int, err error) error { return &exitError{code: code, err: err} }

var rootCmd = &cobra.Command{
	Use:   "reckon",
	Short: "Regression test harness and CI gate for LLM serving engines",
	Long: `reckon launches a serving engine (SGLang, vLLM or the built-in reference engine) in each
configuration of a spec, drives it with real requests, and fails the build when a custom allreduce
is not numerically equivalent to NCCL, when the KV cache or memory falls under its floor, or when
throughput or latency regresses against a stored baseline or another configuration.`,
	SilenceUsage:  true,
	SilenceErrors: true,
	Version:       version,
	PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
		return setupLogging(logFormat, logLevel)
	},
}

var (
	logFormat string
	logLevel  string
)

func init() {
	rootCmd.PersistentFlags().StringVar(&logFormat, "log-format", "text", "log format: text (colored on a terminal), or json (one object per line)")
	rootCmd.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
}

// setupLogging configures the harness logger: logs go to stderr, as text (colored on a terminal)
// or as one JSON object per line.
func setupLogging(format, level string) error {
	lvl, err := logrus.ParseLevel(level)
	if err != nil {
		return withExitCode(2, fmt.Errorf("--log-level: %w (expected debug, info, warn or error)", err))
	}
	logrus.SetLevel(lvl)
	logrus.SetOutput(stderrOut)
	switch format {
	case "text":
		logrus.SetFormatter(&logrus.TextFormatter{
			ForceColors:   term.IsTerminal(int(os.Stderr.Fd())),
			FullTimestamp: true,
		})
	case "json":
		logrus.SetFormatter(&logrus.JSONFormatter{})
	default:
		return withExitCode(2, fmt.Errorf("--log-format %q: expected text or json", format))
	}
	return nil
}

// stderrOut is where the logger writes: main makes it a consoleWriter.
var stderrOut io.Writer = os.Stderr

func main() {
	stdout, stderr := newConsoleWriter(os.Stdout), newConsoleWriter(os.Stderr)
	rootCmd.SetOut(stdout)
	rootCmd.SetErr(stderr)
	stderrOut = stderr
	err := rootCmd.Execute()
	code := 0
	if err != nil {
		code = 2
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if ee == nil || ee.err != nil {
			fmt.Fprintf(stderr, "reckon: %v\n", err)
		}
	}
	stdout.Flush()
	stderr.Flush()
	os.Exit(code)
}
