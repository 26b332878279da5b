package conformance

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/engine"
	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/engine/profile"
	"github.com/reckon-ci/reckon/wire"
	"github.com/reckon-ci/reckon/workload"
)

// corpusDir is the conformance corpus, relative to this package.
const corpusDir = "../../fixtures/conformance"

// logsDir holds the real engine logs that engine/fixtures_test.go reads in full; the corpus
// refers to some of them for the verdicts issue 21 is about.
const logsDir = "../../fixtures/logs"

// vector is one real recorded artefact and what reckon must read from it. path is relative to
// the repository root; check runs reckon's reader over the file at file and fails when reckon
// mis-reads it.
type vector struct {
	path  string
	check func(t *testing.T, file string)
}

// vectors is every vector of fixtures/conformance (TestCorpusWalk fails on a file missing here)
// plus the fixtures/logs excerpts the corpus refers to.
var vectors = []vector{
	// ---------------- SGLang ----------------
	{"fixtures/conformance/sglang/server_info_2026_03_docs_ci.json", checkServerInfo2026},
	{"fixtures/conformance/sglang/generate_plain_2026_03_docs_ci.json", checkGeneratePlain2026},
	{"fixtures/conformance/sglang/startup_log_level_warning_2026_03_docs_ci.log", checkSGLangWarningLog},
	{"fixtures/conformance/sglang/custom_ar_v2_disabled_pcie_tp8_2026_06.log", func(t *testing.T, file string) {
		rep := parseLog(t, file, "sglang")
		if rep.AllReduce != engine.AllReduceNCCL {
			t.Errorf("allreduce = %q, want nccl (custom allreduce v1 and v2 both disabled on 8 PCIe GPUs)", rep.AllReduce)
		}
		if rep.CustomAllReduceDisabledReason == nil || !strings.Contains(*rep.CustomAllReduceDisabledReason, "not supported on more than two PCIe-only GPUs") {
			t.Errorf("disabled reason = %v, want SGLang's PCIe reason", deref(rep.CustomAllReduceDisabledReason))
		}
	}},
	{"fixtures/conformance/sglang/kv_alloc_dtype_tp16_2026_07.log", func(t *testing.T, file string) {
		rep := parseLog(t, file, "sglang")
		if rep.KVCacheTokens == nil || *rep.KVCacheTokens != 387968 {
			t.Errorf("kv_cache_tokens = %v, want 387968 (#tokens of the dtype-format KV line)", derefI(rep.KVCacheTokens))
		}
		if rep.KVCacheGiB == nil || math.Abs(*rep.KVCacheGiB-11.84) > 0.005 {
			t.Errorf("kv_cache_gib = %v, want 11.84 (K 5.92 + V 5.92)", derefF(rep.KVCacheGiB))
		}
		if rep.Ready || len(rep.Errors) != 0 {
			t.Errorf("ready = %v, errors = %v: the excerpt has neither", rep.Ready, rep.Errors)
		}
	}},
	{"fixtures/logs/sglang/tp2_custom_ar_registering_2025_11.log", checkAllReduce("sglang", engine.AllReduceCustom)},
	{"fixtures/logs/sglang/pcie_tp4_custom_ar_disabled_2025_06.log", checkAllReduce("sglang", engine.AllReduceNCCL)},
	{"fixtures/logs/sglang/multinode_tp16_spans_nodes_2025_02.log", checkAllReduce("sglang", engine.AllReduceNCCL)},

	// ---------------- vLLM ----------------
	{"fixtures/conformance/vllm/startup_ready_routes_2026_05.log", checkVLLMReady},
	{"fixtures/conformance/vllm/startup_ready_routes_2026_04.log", checkVLLMReady},
	{"fixtures/conformance/vllm/completions_echo_logprobs_0_16_0.json", checkCompletionsEcho},
	{"fixtures/conformance/vllm/stream_last_chunk_echo_logprobs_0_16_0.sse", checkStreamLastChunk},
	{"fixtures/logs/vllm/v0_7_3_pcie_tp4_workerprocess_2025_02.log", checkAllReduce("vllm", engine.AllReduceNCCL)},

	// ---------------- traces ----------------
	{"fixtures/conformance/traces/torch-2.11-nccl-world1-h200.trace.json.gz", checkTraceWorld1},
}

// TestCorpus runs every vector's check.
func TestCorpus(t *testing.T) {
	for _, v := range vectors {
		t.Run(strings.TrimPrefix(v.path, "fixtures/"), func(t *testing.T) {
			v.check(t, filepath.Join("..", "..", filepath.FromSlash(v.path)))
		})
	}
}

// TestCorpusWalk fails on a vector without a provenance file, a vector without an expectation in
// vectors, a provenance file without a vector, and an expectation whose file is gone.
func TestCorpusWalk(t *testing.T) {
	known := map[string]bool{}
	for _, v := range vectors {
		if known[v.path] {
			t.Errorf("%s: listed twice in vectors", v.path)
		}
		known[v.path] = true
		file := filepath.Join("..", "..", filepath.FromSlash(v.path))
		if _, err := os.Stat(file); err != nil {
			t.Errorf("%s: expectation without a file: %v", v.path, err)
			continue
		}
		if src := sourceOf(file); src == "" {
			t.Errorf("%s: no provenance file (NAME.source) beside it", v.path)
		}
	}
	sources := map[string]bool{}
	n := 0
	err := filepath.WalkDir(corpusDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := "fixtures/conformance/" + filepath.ToSlash(strings.TrimPrefix(p, corpusDir+string(filepath.Separator)))
		if strings.HasSuffix(p, ".source") {
			if _, seen := sources[p]; !seen {
				sources[p] = false
			}
			return nil
		}
		n++
		src := sourceOf(p)
		switch {
		case src == "":
			t.Errorf("%s: vector without a provenance file: add NAME.source (repository or URL, path, commit or issue, date, what it pins)", rel)
		default:
			sources[src] = true
			checkSource(t, rel, src)
		}
		if !known[rel] {
			t.Errorf("%s: vector without an expectation: add it to vectors in internal/conformance/corpus_test.go with what reckon must read from it", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for src, used := range sources {
		if !used {
			t.Errorf("%s: provenance file without a vector", src)
		}
	}
	if n < 10 {
		t.Errorf("the corpus has %d vectors; expected at least 10 (was it moved?)", n)
	}
}

// sourceOf is the provenance file of a vector: NAME.source for NAME.EXT (EXT may hold dots, as
// in .trace.json.gz), or "" when there is none.
func sourceOf(file string) string {
	dir, base := filepath.Split(file)
	for i := len(base) - 1; i > 0; i-- {
		if base[i] != '.' {
			continue
		}
		src := filepath.Join(dir, base[:i]+".source")
		if st, err := os.Stat(src); err == nil && !st.IsDir() {
			return src
		}
	}
	return ""
}

// checkSource requires a provenance file to name where the vector comes from and what it pins.
func checkSource(t *testing.T, rel, src string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Errorf("%s: %v", rel, err)
		return
	}
	text := strings.ToLower(string(b))
	if !strings.Contains(text, "pins") {
		t.Errorf("%s: %s does not say what the vector pins", rel, src)
	}
	if !strings.Contains(text, "http") && !strings.Contains(text, "command:") && !strings.Contains(text, "recorded:") {
		t.Errorf("%s: %s names no source (URL, repository, or the command that recorded it)", rel, src)
	}
}

// ---------------------------------------------------------------- helpers

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func derefI(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func derefF(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func readFile(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parseLog reads a log with kind's grammar and, for "sglang" and "vllm", checks that detection
// names the same engine.
func parseLog(t *testing.T, file, kind string) *engine.Report {
	t.Helper()
	rep, err := engine.ParseLogFile(file, kind)
	if err != nil {
		t.Fatalf("ParseLogFile(%s): %v", kind, err)
	}
	if got := engine.DetectEngine(readFile(t, file)); got != kind {
		t.Errorf("DetectEngine = %q, want %q", got, kind)
	}
	return rep
}

func checkAllReduce(kind, want string) func(t *testing.T, file string) {
	return func(t *testing.T, file string) {
		if rep := parseLog(t, file, kind); rep.AllReduce != want {
			t.Errorf("allreduce = %q, want %q", rep.AllReduce, want)
		}
	}
}

// replay serves body (with contentType) on path and 404 elsewhere, except /v1/models, which
// names one model so that the probe's model lookup has an answer (scaffolding, not a vector).
func replay(t *testing.T, contentType string, routes map[string][]byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, ok := routes[r.URL.Path]; ok {
			w.Header().Set("Content-Type", contentType)
			_, _ = w.Write(b)
			return
		}
		if r.URL.Path == "/v1/models" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"model"}]}`)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// ---------------------------------------------------------------- SGLang checks

// checkServerInfo2026 serves the body on /get_server_info only (as the docs CI's server
// answered it) and /server_info 404, so the client's fallback is exercised too.
func checkServerInfo2026(t *testing.T, file string) {
	srv := replay(t, "application/json", map[string][]byte{"/get_server_info": readFile(t, file)})
	info, err := client.New(srv.URL, client.Options{}).ServerInfo(context.Background())
	if err != nil {
		t.Fatalf("ServerInfo: %v", err)
	}
	if info.Version != "0.0.0.dev1+g753da2753" || info.TPSize != 1 || info.MaxTotalNumTokens != 20480 || info.DisableCustomAR {
		t.Errorf("version %q tp %d max_total_num_tokens %d disable_custom_all_reduce %v; want 0.0.0.dev1+g753da2753, 1, 20480, false",
			info.Version, info.TPSize, info.MaxTotalNumTokens, info.DisableCustomAR)
	}
	if info.LastGenThroughput != 708.9987476461104 {
		t.Errorf("last_gen_throughput = %v, want 708.9987476461104 from internal_states[0]", info.LastGenThroughput)
	}
	if mu := info.MemoryUsage; mu == nil || *mu != (wire.MemoryUsage{Weight: 0.98, KVCache: 0.23, TokenCapacity: 20480, CUDAGraph: 0.06}) {
		t.Errorf("memory_usage = %+v, want {0.98 0.23 20480 0.06} from internal_states[0] (graph key \"graph\")", info.MemoryUsage)
	}
	if info.AllReduceBackend != "" || info.AvgSpecAcceptLength != nil {
		t.Errorf("allreduce_backend %q, avg_spec_accept_length %v: real SGLang sends neither", info.AllReduceBackend, info.AvgSpecAcceptLength)
	}
	v, err := engine.ParseVersion(info.Version)
	if err != nil {
		t.Errorf("ParseVersion(%q): %v", info.Version, err)
	}
	if !v.Newest || !v.AtLeast(0, 22, 0) {
		t.Errorf("ParseVersion(%q) = %+v: a main-branch build must compare as the newest", info.Version, v)
	}
}

func checkGeneratePlain2026(t *testing.T, file string) {
	body := readFile(t, file)
	srv := replay(t, "application/json", map[string][]byte{"/generate": body})
	c := client.New(srv.URL, client.Options{})
	resp, err := c.Generate(context.Background(), wire.GenerateRequest{Text: "What is the capital of France?"})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	m := resp.MetaInfo
	if m.ID != "93fff4f1dfd3496eb1f725361d64333b" || m.PromptTokens != 7 || m.CompletionTokens != 128 || len(resp.OutputIDs) != 128 {
		t.Errorf("id %q prompt %d completion %d output_ids %d; want 93fff4f1…, 7, 128, 128", m.ID, m.PromptTokens, m.CompletionTokens, len(resp.OutputIDs))
	}
	if m.FinishReason["type"] != "length" || m.FinishReason["length"] != float64(128) {
		t.Errorf("finish_reason = %v, want {type: length, length: 128}", m.FinishReason)
	}
	if m.SpecVerifyReported || m.OutputTokenLogprobs != nil || m.InputTokenLogprobs != nil {
		t.Errorf("spec_verify_ct reported %v, logprobs %v %v: the answer has none", m.SpecVerifyReported, m.OutputTokenLogprobs, m.InputTokenLogprobs)
	}
	if m.E2ELatency != 0.27121597435325384 {
		t.Errorf("e2e_latency = %v", m.E2ELatency)
	}
	// The numerics probe asks for logprobs; an answer without them (a server that ignored
	// return_logprob) is an error naming the counts, never an empty or shortened sequence.
	_, err = workload.RunNumericsProbe(context.Background(), c, []workload.Prompt{{ID: "p", Text: "What is the capital of France?"}}, 128, 2)
	if err == nil || !strings.Contains(err.Error(), "no output_token_logprobs") || !strings.Contains(err.Error(), "128 completion tokens") {
		t.Errorf("probe over an answer without logprobs: err = %v, want an error naming no output_token_logprobs for 128 completion tokens", err)
	}
}

// checkSGLangWarningLog: a server that came up (it answered the next cells) but, at
// --log-level warning, logged no ready line and no memory lines. The log is recognisably
// SGLang's; it proves nothing about readiness, which must come from HTTP (issue 21, item 4).
func checkSGLangWarningLog(t *testing.T, file string) {
	rep := parseLog(t, file, "sglang")
	if rep.Ready {
		t.Errorf("ready = true from a log without the ready line")
	}
	if rep.KVCacheTokens != nil || rep.WeightsGiB != nil || rep.AllReduce != engine.AllReduceUnknown || len(rep.Errors) != 0 {
		t.Errorf("report %+v: the warning-level log has no KV, weight, allreduce or error line", rep)
	}
	a, err := engine.AdapterFor("sglang")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(readFile(t, file))))
	for sc.Scan() {
		if a.ReadyLine(sc.Text()) {
			t.Errorf("ReadyLine(%q) = true", sc.Text())
		}
	}
}

// ---------------------------------------------------------------- vLLM checks

// checkVLLMReady: current vLLM's only ready line is "Starting vLLM server on http://...".
func checkVLLMReady(t *testing.T, file string) {
	rep := parseLog(t, file, "vllm")
	if !rep.Ready {
		t.Errorf("ready = false: the log has vLLM's ready line \"Starting vLLM server on\"")
	}
	a, err := engine.AdapterFor("vllm")
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	sc := bufio.NewScanner(strings.NewReader(string(readFile(t, file))))
	for sc.Scan() {
		if a.ReadyLine(sc.Text()) {
			ready++
			if !strings.Contains(sc.Text(), "Starting vLLM server on http://") {
				t.Errorf("ReadyLine(%q) = true for a line that is not the ready line", sc.Text())
			}
		}
	}
	if ready != 1 {
		t.Errorf("%d ready lines recognised, want 1", ready)
	}
}

func checkCompletionsEcho(t *testing.T, file string) {
	srv := replay(t, "application/json", map[string][]byte{"/v1/completions": readFile(t, file)})
	one, k := 1, 5
	resp, err := client.New(srv.URL, client.Options{Model: "m"}).Complete(context.Background(),
		wire.CompletionRequest{Prompt: client.PromptText("The step of boiling water is: "), Echo: true, Logprobs: &k, MaxTokens: &one})
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	ch := resp.Choices[0]
	lp := ch.Logprobs
	if lp == nil || len(lp.Tokens) != 9 || len(lp.TokenLogprobs) != 9 || len(lp.TextOffset) != 9 {
		t.Fatalf("logprobs = %+v, want 9 tokens (8 echoed prompt tokens + 1 generated)", lp)
	}
	if lp.TokenLogprobs[0] != nil {
		t.Errorf("token_logprobs[0] = %v, want null (the first prompt token has no logprob)", *lp.TokenLogprobs[0])
	}
	for i := 1; i < 9; i++ {
		if lp.TokenLogprobs[i] == nil || *lp.TokenLogprobs[i] > 0 {
			t.Errorf("token_logprobs[%d] = %v, want a log-probability", i, lp.TokenLogprobs[i])
		}
	}
	if lp.Tokens[8] != "1" || ch.Text != "The step of boiling water is: 1" || resp.ID != "cmpl-8c16f81d43846721" || resp.Object != "text_completion" {
		t.Errorf("text %q last token %q id %q object %q", ch.Text, lp.Tokens[8], resp.ID, resp.Object)
	}
	if len(ch.TokenIDs) != 0 || len(ch.PromptTokenIDs) != 0 {
		t.Errorf("token ids %v / %v: not requested, not sent", ch.TokenIDs, ch.PromptTokenIDs)
	}
}

// checkStreamLastChunk replays the recorded stream tail: the last token's chunk carries
// finish_reason, then [DONE].
func checkStreamLastChunk(t *testing.T, file string) {
	srv := replay(t, "text/event-stream", map[string][]byte{"/v1/completions": readFile(t, file)})
	var chunks []client.Chunk
	res, err := client.New(srv.URL, client.Options{Model: "m"}).Stream(context.Background(),
		wire.CompletionRequest{Prompt: client.PromptText("x")}, func(c client.Chunk) { chunks = append(chunks, c) })
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if res.Text != "7" || res.FinishReason != "length" || !res.Done || res.OutputTokens != 1 || len(res.Arrivals) != 1 || res.Usage != nil {
		t.Errorf("text %q finish %q done %v output tokens %d content chunks %d usage %v; want \"7\", length, true, 1, 1, nil",
			res.Text, res.FinishReason, res.Done, res.OutputTokens, len(res.Arrivals), res.Usage)
	}
	if len(chunks) != 1 || !chunks[0].Content || chunks[0].FinishReason != "length" {
		t.Errorf("chunks = %+v, want one content chunk carrying finish_reason length", chunks)
	}
	if res.Logprobs == nil || len(res.Logprobs.Tokens) != 1 || len(res.Logprobs.TopLogprobs) != 1 || len(res.Logprobs.TopLogprobs[0]) != 5 {
		t.Errorf("logprobs = %+v, want one token with 5 top candidates", res.Logprobs)
	}
}

// ---------------------------------------------------------------- traces

// checkTraceWorld1: at world size 1 NCCL runs the allreduce without a kernel; the trace is
// read, and no allreduce kernel is not evidence of NCCL: the verdict is unknown.
func checkTraceWorld1(t *testing.T, file string) {
	fc, err := profile.ParseFile(context.Background(), file)
	if err != nil {
		t.Fatalf("ParseFile: %v", err)
	}
	if fc.Rank != 0 || fc.NCCLAllReduce != 0 || fc.CustomAllReduce != 0 || fc.Events == 0 {
		t.Errorf("rank %d nccl %d custom %d events %d; want rank 0 (distributedInfo), no allreduce kernel, some events",
			fc.Rank, fc.NCCLAllReduce, fc.CustomAllReduce, fc.Events)
	}
	s := &profile.Summary{}
	s.Add(*fc)
	if v := s.Verdict(); v != profile.VerdictUnknown {
		t.Errorf("verdict = %q, want unknown (no allreduce kernel ran)", v)
	}
	if _, err := profile.ParseFile(context.Background(), filepath.Join(filepath.Dir(file), "missing.trace.json.gz")); !errors.Is(err, fs.ErrNotExist) && err == nil {
		t.Errorf("a missing trace parsed without error")
	}
}

// sortedKeys is used by the shape tests to print stable diffs.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
