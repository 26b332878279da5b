// Command refengine is the reference engine: a small but real tensor-parallel transformer server
// that speaks SGLang's command line, HTTP API and log format, so that reckon's sglang adapter can
// drive it unchanged. `refengine vllm serve MODEL ...` (or `refengine --dialect vllm ...`) speaks
// vLLM's instead, for the vllm adapter: the same engine behind vLLM's flags, V1 log lines, OpenAI
// API shapes and vllm:* metrics. `--engine-version V` (both dialects) imitates a named release of
// the engine (SGLang 0.3, 0.4, latest; vLLM 0.10, 0.12, 0.22); `--version` prints its version.
// `refengine probe-allreduce ...` runs the op-level allreduce probe.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/reckon-ci/reckon/refengine/collective"
	"github.com/reckon-ci/reckon/refengine/server"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "probe-allreduce" {
		os.Exit(collective.RunProbeCLI(args[1:], os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := server.Main(ctx, args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
