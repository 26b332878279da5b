# reckon — see README.md. `make gate` and `make test` do all setup on a fresh machine (Go only).
SHELL   := /bin/bash
GO      ?= go
BIN     := bin
OUT     ?= out
SPEC    ?= fixtures/specs/default.yaml
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build gate test bench lint clean templates-e2e

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/reckon ./cmd/reckon
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/refengine ./cmd/refengine

# The main job: the gate on the reference engine. Reports go to $(OUT)/; exits non-zero when red.
gate: build
	$(BIN)/reckon gate --spec $(SPEC) --out $(OUT)

# Unit and integration tests (no GPU needed). Kept under 10 minutes on 2 cores. The end-to-end
# gate runs (./suites) go last and alone: they compare throughput between configs measured one
# after another, so no other package's tests may load the CPU meanwhile.
test:
	$(GO) vet ./...
	$(GO) test -timeout 5m $$($(GO) list ./... | grep -v '/suites$$')
	$(GO) test -timeout 8m ./suites/

# Benchmarks: speed and memory targets are measured here, never asserted in tests. Prints one
# table row per benchmark (custom units: out_tok/s, kv_tokens, tokens/s, detect5%@cv2n5_%, ...)
# and keeps a copy in $(OUT)/bench.txt. BENCHTIME=5x for steadier numbers.
BENCHTIME ?= 1x
bench: build
	@mkdir -p $(OUT)
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) ./... | grep -E '^(Benchmark|pkg:|ok|FAIL|---)' | tee $(OUT)/bench.txt

# The engine CI templates (ci/engine/) executed end to end, their own run: lines, against a fixture
# engine repository (scenarios healthy, slow, numerics, loosened-spec; the nightly twice). Writes
# $(OUT)/templates-e2e/summary.json and exits non-zero on a mismatch. About 6 minutes on 2 cores
# (cold build cache), so it is not part of `make test`.
templates-e2e:
	$(GO) run ./ci/templates-e2e

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...

clean:
	rm -rf $(BIN) $(OUT)
