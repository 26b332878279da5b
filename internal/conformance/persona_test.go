package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The persona tests start each reference-engine persona, ask it what the real vectors asked
// the real engines, and compare the JSON shapes (key sets and value types, recursively; values
// ignored; null matches any type). A difference fails unless allowShape lists it with a reason.

var (
	refengineOnce sync.Once
	refengineBin  string
	refengineErr  error
)

// refengine builds cmd/refengine once per test binary.
func refengine(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and starts the reference engine")
	}
	refengineOnce.Do(func() {
		dir, err := os.MkdirTemp("", "conformance-refengine-")
		if err != nil {
			refengineErr = err
			return
		}
		refengineBin = filepath.Join(dir, "refengine")
		out, err := exec.Command("go", "build", "-o", refengineBin, "github.com/reckon-ci/reckon/cmd/refengine").CombinedOutput()
		if err != nil {
			refengineErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if refengineErr != nil {
		t.Fatalf("building the reference engine: %v", refengineErr)
	}
	return refengineBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if refengineBin != "" {
		os.RemoveAll(filepath.Dir(refengineBin))
	}
	os.Exit(code)
}

// persona is one running reference engine.
type persona struct {
	base string
}

// lockedBuffer lets the process write while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}

// startPersona starts refengine with args plus a free port on 127.0.0.1 and waits for /health.
func startPersona(t *testing.T, args ...string) (*persona, *lockedBuffer) {
	t.Helper()
	bin := refengine(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	args = append(args, "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	out := &lockedBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("refengine %v: no healthy /health within 20 s; output:\n%s", args, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &persona{base: base}, out
}

func tinyModel(t *testing.T) string {
	t.Helper()
	m, err := filepath.Abs(filepath.Join("..", "..", "fixtures", "models", "tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// do sends one request and returns status and body.
func (p *persona) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, p.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}

func decodeJSON(t *testing.T, what string, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v: %.300s", what, err, b)
	}
	return v
}

// shapeDiff lists the shape differences of persona against real under path: "missing P" (real
// has the key, the persona not), "extra P" (the persona invents it), "type P: real X, persona Y".
// Arrays compare their first non-null elements; null on either side matches any type. With
// trimmed (the vector was cut to some keys) persona keys absent from the vector are not
// differences.
func shapeDiff(path string, real, got any, trimmed bool) []string {
	var out []string
	if real == nil || got == nil {
		return nil
	}
	switch r := real.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("type %s: real object, persona %s", path, jsonType(got))}
		}
		for _, k := range sortedKeys(r) {
			gv, ok := g[k]
			if !ok {
				out = append(out, "missing "+path+"."+k)
				continue
			}
			out = append(out, shapeDiff(path+"."+k, r[k], gv, trimmed)...)
		}
		if !trimmed {
			for _, k := range sortedKeys(g) {
				if _, ok := r[k]; !ok {
					out = append(out, "extra "+path+"."+k)
				}
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("type %s: real array, persona %s", path, jsonType(got))}
		}
		re, ge := firstNonNull(r), firstNonNull(g)
		out = append(out, shapeDiff(path+"[]", re, ge, trimmed)...)
	default:
		if jsonType(real) != jsonType(got) {
			out = append(out, fmt.Sprintf("type %s: real %s, persona %s", path, jsonType(real), jsonType(got)))
		}
	}
	return out
}

func firstNonNull(a []any) any {
	for _, v := range a {
		if v != nil {
			return v
		}
	}
	return nil
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// allowShape lists known, documented differences between a persona's answers and the real
// vectors: key "VECTOR|DIFF" (DIFF as shapeDiff prints it), value the reason. "open:" marks a
// reference-engine gap this corpus found (docs/conformance.md, "What the corpus caught"), kept
// here so that the suite stays green until the reference engine follows; reckon reads none of
// those keys, or reads both spellings.
var allowShape = map[string]string{
	// SGLang /generate, latest persona against the 2026-03 docs CI body.
	"generate_plain_2026_03_docs_ci|missing .meta_info.cached_tokens":              "open: prefix-cache accounting; reckon does not read it",
	"generate_plain_2026_03_docs_ci|missing .meta_info.cached_tokens_details":      "open: prefix-cache accounting (device/host split); reckon does not read it",
	"generate_plain_2026_03_docs_ci|missing .meta_info.dp_rank":                    "open: data parallelism is not modelled; reckon does not read it",
	"generate_plain_2026_03_docs_ci|missing .meta_info.response_sent_to_client_ts": "open: a timing field reckon does not read",
	"generate_plain_2026_03_docs_ci|missing .meta_info.total_retractions":          "open: retraction is not modelled; reckon does not read it",
	"generate_plain_2026_03_docs_ci|missing .meta_info.weight_version":             "open: weight updates are not modelled; reckon does not read it",
	// SGLang server info, latest persona against the 2026-03 docs CI body.
	"server_info_2026_03_docs_ci|missing .status":                               "open: real SGLang reports \"status\": \"ready\"; reckon does not read it",
	"server_info_2026_03_docs_ci|missing .max_req_input_len":                    "open: reckon does not read it",
	"server_info_2026_03_docs_ci|missing .internal_states[].use_mla_backend":    "open: reckon does not read it",
	"server_info_2026_03_docs_ci|missing .internal_states[].memory_usage.graph": "documented in real-engines-2026.md 5.2: the persona names it cuda_graph (older SGLang's key); reckon's client reads cuda_graph, else graph",
	// vLLM streamed completion, every persona against vLLM 0.16.0's last event.
	"stream_last_chunk_echo_logprobs_0_16_0|missing .choices[].prompt_token_ids": "open: real vLLM sends null when return_token_ids is not set, the persona omits the key; reckon decodes both as none",
	"stream_last_chunk_echo_logprobs_0_16_0|missing .choices[].token_ids":        "open: as prompt_token_ids",
	"stream_last_chunk_echo_logprobs_0_16_0|missing .usage":                      "open: real vLLM sends \"usage\": null without stream_options, the persona omits the key; reckon decodes both as none",
	"stream_last_chunk_echo_logprobs_0_16_0|finish_reason on an empty chunk":     "issue 21 (Older and newer releases): both dialects send an extra empty finish_reason chunk after the last token; real engines put finish_reason on the last token's chunk. reckon reads both (engine/client Stream)",
}

// sglangNonArgs are the keys of SGLang's server info that are not server arguments (top level,
// and per rank in internal_states); every other key of the vector is a ServerArgs field.
var sglangNonArgs = map[string]bool{"status": true, "max_total_num_tokens": true, "max_req_input_len": true, "internal_states": true, "version": true,
	"use_mla_backend": true, "last_gen_throughput": true, "memory_usage": true, "effective_max_running_requests_per_dp": true}

// serverArgReckonReads are the server arguments reckon's client reads from the top level of
// server info: a persona must have them there.
var serverArgReckonReads = map[string]bool{"tp_size": true, "disable_custom_all_reduce": true}

// isServerArgGap reports whether d is a missing SGLang server argument that reckon does not read:
// the persona's server info lists only the arguments the reference engine models.
func isServerArgGap(vectorName, d string) bool {
	if vectorName != "server_info_2026_03_docs_ci" {
		return false
	}
	k, ok := strings.CutPrefix(d, "missing .")
	if !ok {
		return false
	}
	perRank := strings.HasPrefix(k, "internal_states[].")
	k = strings.TrimPrefix(k, "internal_states[].")
	return !strings.Contains(k, ".") && !sglangNonArgs[k] && (perRank || !serverArgReckonReads[k])
}

// checkShapes fails on every difference not in allowShape, and logs every allowed one.
func checkShapes(t *testing.T, vectorName string, diffs []string) {
	t.Helper()
	var args []string
	for _, d := range diffs {
		if why, ok := allowShape[vectorName+"|"+d]; ok {
			t.Logf("known difference against %s: %s (%s)", vectorName, d, why)
			continue
		}
		if isServerArgGap(vectorName, d) {
			args = append(args, strings.TrimPrefix(d, "missing "))
			continue
		}
		t.Errorf("shape differs from the real vector %s: %s", vectorName, d)
	}
	if len(args) > 0 {
		t.Logf("known difference against %s: %d SGLang server arguments the reference engine does not model and reckon does not read: %s",
			vectorName, len(args), strings.Join(args, ", "))
	}
}

func vectorJSON(t *testing.T, rel string) any {
	t.Helper()
	return decodeJSON(t, rel, readFile(t, filepath.Join(corpusDir, filepath.FromSlash(rel))))
}

// TestSGLangPersonaShapes: each SGLang persona serves its release's server-info routes; the
// latest persona's /server_info and /generate have the shapes of the real 2026-03 main build's.
func TestSGLangPersonaShapes(t *testing.T) {
	for _, v := range []string{"0.3", "0.4", "latest"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			p, out := startPersona(t, "--engine-version", v, "--model-path", tinyModel(t))
			st, _ := p.do(t, "GET", "/server_info", "")
			gst, gbody := p.do(t, "GET", "/get_server_info", "")
			wantNew := v != "0.3" // 0.3: @app.get("/get_server_info") only
			if (st == http.StatusOK) != wantNew || gst != http.StatusOK {
				t.Errorf("/server_info %d, /get_server_info %d; want /server_info served: %v, /get_server_info served", st, gst, wantNew)
			}
			gen := `{"text":"What is the capital of France?","sampling_params":{"max_new_tokens":8,"temperature":0}}`
			gs, genBody := p.do(t, "POST", "/generate", gen)
			if gs != http.StatusOK {
				t.Fatalf("/generate: %d %s", gs, genBody)
			}
			if v != "latest" {
				t.Logf("no real %s vector in the corpus: only the routes are compared", v)
				return
			}
			// The server-info vector is trimmed (server args cut), so only keys real SGLang sends
			// are checked, and the persona-only top-level keys documented in issue 21 are listed.
			info := decodeJSON(t, "/get_server_info", gbody)
			checkShapes(t, "server_info_2026_03_docs_ci", shapeDiff("", vectorJSON(t, "sglang/server_info_2026_03_docs_ci.json"), info, true))
			for _, k := range []string{"memory_usage", "last_gen_throughput", "avg_spec_accept_length", "allreduce_backend"} {
				if _, ok := info.(map[string]any)[k]; ok {
					t.Logf("known difference against server_info_2026_03_docs_ci: extra top-level %s (real SGLang keeps per-rank state in internal_states only; docs/reference real-engines-2026.md 5.2; reckon reads internal_states when the top level lacks it)", k)
				}
			}
			checkShapes(t, "generate_plain_2026_03_docs_ci", shapeDiff("", vectorJSON(t, "sglang/generate_plain_2026_03_docs_ci.json"), decodeJSON(t, "/generate", genBody), false))
			// With --log-level warning (as SGLang's docs launch it) the real server printed no ready line.
			_ = out
		})
	}
}

// realVLLMReady is the shape of current vLLM's ready line in the real start-up vectors.
var realVLLMReady = regexp.MustCompile(`^\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[api_server\.py:\d+\] Starting vLLM server on http://\S+$`)

// TestVLLMPersonaShapes: each vLLM persona's echo + logprobs completion and the last event of a
// streamed one have the shapes of vLLM 0.16.0's; the 0.22 persona prints the real ready line.
func TestVLLMPersonaShapes(t *testing.T) {
	for _, v := range []string{"0.10", "0.12", "0.22"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			p, out := startPersona(t, "vllm", "--engine-version", v, "serve", tinyModel(t))
			st, body := p.do(t, "POST", "/v1/completions", `{"prompt":"The step of boiling water is: ","stream":false,"echo":true,"logprobs":5,"max_tokens":1}`)
			if st != http.StatusOK {
				t.Fatalf("/v1/completions: %d %s", st, body)
			}
			// The echo vector is trimmed after logprobs.tokens: only real keys are checked.
			checkShapes(t, "completions_echo_logprobs_0_16_0", shapeDiff("", vectorJSON(t, "vllm/completions_echo_logprobs_0_16_0.json"), decodeJSON(t, "echo", body), true))

			st, body = p.do(t, "POST", "/v1/completions", `{"prompt":"The step of boiling water is: ","stream":true,"echo":true,"logprobs":5,"max_tokens":1}`)
			if st != http.StatusOK {
				t.Fatalf("/v1/completions (stream): %d %s", st, body)
			}
			events := sseEvents(body)
			if len(events) < 2 || events[len(events)-1] != "[DONE]" {
				t.Fatalf("stream events %q: want data events then [DONE]", events)
			}
			finish := -1
			for i, e := range events[:len(events)-1] {
				if strings.Contains(e, `"finish_reason":"`) {
					finish = i
				}
			}
			if finish < 0 {
				t.Fatalf("no event carries finish_reason: %q", events)
			}
			last := decodeJSON(t, "stream event", []byte(events[finish]))
			realSSE := sseEvents(readFile(t, filepath.Join(corpusDir, "vllm", "stream_last_chunk_echo_logprobs_0_16_0.sse")))
			checkShapes(t, "stream_last_chunk_echo_logprobs_0_16_0", shapeDiff("", decodeJSON(t, "vector", []byte(realSSE[0])), last, false))
			// Real vLLM puts finish_reason on the last token's chunk (text "7" in the vector).
			if ch := last.(map[string]any)["choices"].([]any)[0].(map[string]any); ch["text"] == "" {
				checkShapes(t, "stream_last_chunk_echo_logprobs_0_16_0", []string{"finish_reason on an empty chunk"})
			}

			ready := 0
			for _, l := range strings.Split(out.String(), "\n") {
				if realVLLMReady.MatchString(strings.TrimRight(l, "\r")) {
					ready++
				}
			}
			if want := map[string]int{"0.10": 0, "0.12": 0, "0.22": 1}[v]; ready != want {
				t.Errorf("%d lines of the real ready-line shape (%s), want %d", ready, realVLLMReady, want)
			}
		})
	}
}

// sseEvents splits a server-sent-event body into its data payloads.
func sseEvents(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if d, ok := strings.CutPrefix(strings.TrimRight(l, "\r"), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}
