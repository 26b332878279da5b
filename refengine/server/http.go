package server

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/reckon-ci/reckon/wire"
)

// maxBodyBytes bounds request bodies.
const maxBodyBytes = 8 << 20

// Handler is the engine's HTTP API.
func (e *Engine) Handler() http.Handler {
	if e.Opts.Dialect == DialectVLLM {
		return e.vllmHandler() // vllm_http.go
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", e.health)
	mux.HandleFunc("GET /health_generate", e.healthGenerate)
	mux.HandleFunc("GET /v1/models", e.models)
	mux.HandleFunc("POST /v1/completions", e.completions)
	mux.HandleFunc("POST /v1/chat/completions", e.chatCompletions) // chat.go
	mux.HandleFunc("POST /generate", e.generate)
	mux.HandleFunc("GET /get_server_info", e.serverInfo)
	mux.HandleFunc("GET /get_model_info", e.modelInfo)
	mux.HandleFunc("GET /flush_cache", e.flushCache)
	mux.HandleFunc("POST /flush_cache", e.flushCache)
	mux.HandleFunc("GET /metrics", e.metrics)
	mux.HandleFunc("GET /start_profile", e.sglangStartProfile)
	mux.HandleFunc("POST /start_profile", e.sglangStartProfile)
	mux.HandleFunc("GET /stop_profile", e.sglangStopProfile)
	mux.HandleFunc("POST /stop_profile", e.sglangStopProfile)
	known := map[string]string{"/health": "GET", "/health_generate": "GET", "/v1/models": "GET", "/v1/completions": "POST",
		"/v1/chat/completions": "POST", "/generate": "POST", "/get_server_info": "GET", "/get_model_info": "GET",
		"/flush_cache": "GET, POST", "/metrics": "GET", "/start_profile": "GET, POST", "/stop_profile": "GET, POST"}
	if !e.Opts.Persona.ServerInfoOnlyOld {
		// Newer releases serve the new names too (the old ones are deprecated aliases).
		mux.HandleFunc("GET /server_info", e.serverInfo)
		mux.HandleFunc("GET /model_info", e.modelInfo)
		known["/server_info"], known["/model_info"] = "GET", "GET"
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow, ok := known[r.URL.Path]; ok {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Sprintf("%s %s: method not allowed (use %s)", r.Method, r.URL.Path, allow))
			return
		}
		writeError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, wire.ErrorResponse{Error: wire.ErrorBody{Message: msg, Type: typ, Code: status}})
}

func badRequest(w http.ResponseWriter, format string, args ...any) {
	writeError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf(format, args...))
}

func (e *Engine) health(w http.ResponseWriter, _ *http.Request) {
	if !e.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// healthGenerate is /health_generate: 503 until ready, then a one-token generation through the
// scheduler (200 when it completes, 503 when it fails).
func (e *Engine) healthGenerate(w http.ResponseWriter, r *http.Request) {
	if !e.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if err := e.generateOne(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "health generation failed: "+err.Error())
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (e *Engine) modelName() string {
	if e.Opts.ServedModelName != "" {
		return e.Opts.ServedModelName
	}
	return e.Opts.ModelPath
}

func (e *Engine) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, wire.ModelList{Object: "list", Data: []wire.ModelCard{{ID: e.modelName(), Object: "model", OwnedBy: "sglang", MaxLen: e.ContextLen}}})
}

func (e *Engine) modelInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"model_path": e.Opts.ModelPath, "tokenizer_path": e.Opts.ModelPath, "is_generation": true,
		"preferred_sampling_params": nil, "weight_version": "default"})
}

func (e *Engine) flushCache(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusOK)
	fmt.Fprintln(w, "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)")
}

func (e *Engine) metrics(w http.ResponseWriter, _ *http.Request) {
	st := e.Sched.Stats()
	lbl := fmt.Sprintf(`{model_name=%q}`, e.modelName())
	var b strings.Builder
	m := func(name, typ, help string, v any) {
		fmt.Fprintf(&b, "# HELP sglang:%s %s\n# TYPE sglang:%s %s\nsglang:%s%s %v\n", name, help, name, typ, name, lbl, v)
	}
	m("num_running_reqs", "gauge", "The number of running requests.", st.Running)
	m("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", st.Queued)
	m("num_used_tokens", "gauge", "The number of used KV cache tokens.", st.UsedTokens+st.LeakedTokens)
	m("max_total_num_tokens", "gauge", "KV cache token capacity.", st.CapacityTokens)
	m("token_usage", "gauge", "The token usage (fraction of the KV cache in use).", fmt.Sprintf("%.6f", st.TokenUsage()))
	m("gen_throughput", "gauge", "The generation throughput (token/s) of the last decode log window.", fmt.Sprintf("%.3f", st.LastGenThroughput))
	m("spec_accept_length", "gauge", "The average acceptance length of speculative decoding.", fmt.Sprintf("%.4f", st.AvgAcceptLength()))
	m("generation_tokens_total", "counter", "Number of generation tokens processed.", st.GenerationTokensTotal)
	m("prompt_tokens_total", "counter", "Number of prefill tokens processed.", st.PromptTokensTotal)
	m("num_requests_total", "counter", "Number of requests received.", st.RequestsTotal)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(b.String()))
}

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err := dec.Decode(v); err != nil {
		badRequest(w, "invalid JSON body: %v", err)
		return false
	}
	return true
}
