# reckon — see README.md. `make gate` and `make test` do all setup on a fresh machine (Go only).
SHELL   := /bin/bash
GO      ?= go
BIN     := bin
OUT     ?= out
SPEC    ?= fixtures/specs/default.yaml
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# The one home of the build's -ldflags: `make build` uses it, and `make test` hands it to the
# suites' TestMain (RECKON_LDFLAGS), which rebuilds bin/reckon and bin/refengine with it; a plain
# `go test ./suites/` asks `make -s ldflags` for the same value.
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build gate test fuzz bench lint clean templates-e2e ldflags

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/reckon ./cmd/reckon
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/refengine ./cmd/refengine

# The main job: the gate on the reference engine. Reports go to $(OUT)/; exits non-zero when red.
gate: build
	$(BIN)/reckon gate --spec $(SPEC) --out $(OUT)

# Unit and integration tests (no GPU needed). Kept under 10 minutes on an idle 2-core box. The
# end-to-end gate runs (./suites) go last, as many at a time as there are cores: their throughput
# verdicts run on the reference engine's device clock at two requests in flight, so load beside
# them (another gate, two busy loops) slows a run but does not change a verdict; the 30-minute
# timeouts only catch a hang, no amount of load is meant to reach them.
test:
	$(GO) vet ./...
	$(GO) test -timeout 30m $$($(GO) list ./... | grep -v '/suites$$')
	RECKON_LDFLAGS='$(LDFLAGS)' $(GO) test -timeout 30m ./suites/

# Prints the -ldflags of `make build` (the suites' TestMain builds bin/ with it).
ldflags:
	@echo '$(LDFLAGS)'

# A short fuzz run of every reader of untrusted input (issue 25): the spec loader, each
# importer, the results and baseline readers, merge's shard verification and the sanitisers.
# Seeds are in each package's testdata/fuzz/. FUZZTIME is a count of executions per target
# (Go reports the count of a timed run late), about 2 minutes in all on 2 cores; a crash fails
# the target and writes the input to testdata/fuzz/ (commit it with the fix).
FUZZTIME ?= 20000x
FUZZ_TARGETS := ./spec:FuzzParse ./workload:FuzzImportVLLM ./workload:FuzzImportSGLang \
	./workload:FuzzImportAIPerf ./workload:FuzzImportConsole ./workload:FuzzImportNCCL \
	./reporters:FuzzDecodeResults ./gate:FuzzDecodeBaseline ./suites:FuzzVerifyShards \
	./internal/sanitize:FuzzSanitizers
fuzz:
	@set -o pipefail; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; start=$$(date +%s); \
	  out=$$($(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -timeout 90s $$pkg 2>&1) \
	    || { echo "$$out" | tail -40; echo "fuzz $$name: FAILED"; exit 1; }; \
	  echo "fuzz $$name: $$(echo "$$out" | grep -o 'execs: [0-9]*' | tail -1 | cut -d' ' -f2) executions in $$(( $$(date +%s) - start ))s, $$(echo "$$out" | grep -o 'total: [0-9]*' | tail -1 | cut -d' ' -f2) corpus entries"; \
	done

# Benchmarks: speed and memory targets are measured here, never asserted in tests. Prints one
# table row per benchmark (custom units: out_tok/s, kv_tokens, tokens/s, detect5%@cv2n5_%, ...)
# and keeps a copy in $(OUT)/bench.txt. BENCHTIME=5x for steadier numbers.
BENCHTIME ?= 1x
bench: build
	@mkdir -p $(OUT)
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) ./... | grep -E '^(Benchmark|pkg:|ok|FAIL|---)' | tee $(OUT)/bench.txt

# The engine CI templates (ci/engine/: GitHub Actions, GitLab CI, Buildkite, Kubernetes) executed
# end to end, their own commands, against a fixture engine repository (pre-merge scenarios
# healthy, slow, numerics, loosened-spec; the nightly twice). Writes
# $(OUT)/templates-e2e/summary.json and exits non-zero on a mismatch. .ci/run runs it after
# `make fuzz`; it is not part of `make test` (timings: docs/ci.md).
templates-e2e:
	$(GO) run ./ci/templates-e2e

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...

clean:
	rm -rf $(BIN) $(OUT)
