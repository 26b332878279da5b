package main

import (
	"fmt"
	"math"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/workload"
)

// vllmFlags are the flags of `vllm bench serve` that reckon bench accepts under vLLM's names,
// with vLLM's meaning. Plain aliases (--max-concurrency, --random-input-len, ...) share the
// variable of reckon's own flag; the rest are resolved by apply.
type vllmFlags struct {
	baseURL, host, endpoint, backend  string
	port                              int
	datasetName, datasetPath          string
	saveResult                        bool
	resultDir, resultFilename         string
	percentileMetrics, metricPercents string
	disableTqdm                       bool
	temperature, topP                 float64
}

// vllmAliases maps each plain alias to reckon's flag (for help and for the conflict check).
var vllmAliases = map[string]string{
	"max-concurrency":    "concurrency",
	"random-input-len":   "input-len",
	"random-output-len":  "output-len",
	"random-range-ratio": "range-ratio",
	"random-prefix-len":  "prefix-len",
	"num-warmups":        "warmup",
	"save-detailed":      "details",
	"metadata":           "label",
	"disable-tqdm":       "quiet",
	"dataset-path":       "dataset",
	"base-url":           "url",
	"result-filename":    "result",
	"percentile-metrics": "",
	"metric-percentiles": "",
	"dataset-name":       "",
	"save-result":        "",
	"result-dir":         "",
	"host":               "",
	"port":               "",
	"endpoint":           "",
	"backend":            "",
}

// register defines the vLLM flags on cmd.
func (v *vllmFlags) register(cmd *cobra.Command, o *workload.Options, labels *[]string) {
	f := cmd.Flags()
	alias := func(name string) string { return "vLLM's name for --" + vllmAliases[name] }
	f.IntVar(&o.Concurrency, "max-concurrency", 0, alias("max-concurrency"))
	f.IntVar(&o.InputLen, "random-input-len", 0, alias("random-input-len"))
	f.IntVar(&o.OutputLen, "random-output-len", 0, alias("random-output-len"))
	f.Float64Var(&o.RangeRatio, "random-range-ratio", 0, alias("random-range-ratio"))
	f.IntVar(&o.PrefixLen, "random-prefix-len", 0, alias("random-prefix-len"))
	f.IntVar(&o.Warmup, "num-warmups", 0, alias("num-warmups"))
	f.BoolVar(&o.Details, "save-detailed", false, alias("save-detailed"))
	f.StringArrayVar(labels, "metadata", nil, alias("metadata")+" (KEY=VALUE, several may follow)")
	f.BoolVar(&v.disableTqdm, "disable-tqdm", false, alias("disable-tqdm"))
	f.StringVar(&v.datasetPath, "dataset-path", "", alias("dataset-path"))
	f.StringVar(&v.baseURL, "base-url", "", alias("base-url"))
	f.StringVar(&v.resultFilename, "result-filename", "", "vLLM: the result file name (in --result-dir); alias of --result")
	f.StringVar(&v.host, "host", "", "vLLM: server host (with --port, instead of --url)")
	f.IntVar(&v.port, "port", 0, "vLLM: server port (default 8000 with --host)")
	f.StringVar(&v.endpoint, "endpoint", "/v1/completions", "vLLM: API path: /v1/completions, or /v1/chat/completions (text prompts, one user message)")
	f.StringVar(&v.backend, "backend", "openai", "vLLM: openai, vllm or sglang (streamed /v1/completions), or openai-chat (/v1/chat/completions)")
	f.StringVar(&v.datasetName, "dataset-name", "", "vLLM: random (synthetic prompts), sharegpt or custom (with --dataset-path)")
	f.BoolVar(&v.saveResult, "save-result", false, "vLLM: write the result file (named as vLLM does unless --result-filename)")
	f.StringVar(&v.resultDir, "result-dir", "", "vLLM: directory of the result file")
	f.StringVar(&v.percentileMetrics, "percentile-metrics", "", "vLLM: ttft,tpot,itl,e2el (reckon always reports all four)")
	f.StringVar(&v.metricPercents, "metric-percentiles", "", "vLLM: percentiles to report; reckon reports 50 (median), 90, 95 and 99")
}

// apply resolves the vLLM flags that are more than aliases into url, result, o and dataset. A
// vLLM flag that contradicts reckon's own is an error naming both.
func (v *vllmFlags) apply(cmd *cobra.Command, url, result string, o *workload.Options, dataset *string) (string, string, error) {
	f := cmd.Flags()
	both := func(a, b string) error {
		if f.Changed(a) && f.Changed(b) {
			return fmt.Errorf("--%s and --%s are the same setting (--%s is vLLM's name): give one", a, b, b)
		}
		return nil
	}
	for alias, own := range vllmAliases {
		if own != "" {
			if err := both(own, alias); err != nil {
				return "", "", err
			}
		}
	}
	if v.baseURL != "" {
		url = v.baseURL
	}
	if f.Changed("host") || f.Changed("port") {
		if url != "" {
			return "", "", fmt.Errorf("--host/--port and --url (or --base-url) name the server twice: give one")
		}
		host, port := v.host, v.port
		if host == "" {
			host = "127.0.0.1"
		}
		if port == 0 {
			port = 8000
		}
		url = "http://" + net.JoinHostPort(host, strconv.Itoa(port))
	}
	switch strings.TrimRight(v.endpoint, "/") {
	case "/v1/completions", "":
	case workload.ChatPath:
		o.Chat = true
	default:
		return "", "", fmt.Errorf("--endpoint %q: expected /v1/completions or %s", v.endpoint, workload.ChatPath)
	}
	switch v.backend {
	case "openai", "vllm", "sglang", "sglang-oai", "lmdeploy":
	case "openai-chat", "sglang-oai-chat":
		o.Chat = true
	default:
		return "", "", fmt.Errorf("--backend %q: expected openai, vllm, sglang (streamed /v1/completions) or openai-chat (%s)", v.backend, workload.ChatPath)
	}
	if v.datasetPath != "" {
		*dataset = v.datasetPath
	}
	switch v.datasetName {
	case "":
	case "random":
		if *dataset != "" {
			return "", "", fmt.Errorf("--dataset-name random makes synthetic prompts; drop --dataset-path %s (or use --dataset-name sharegpt|custom)", *dataset)
		}
	case "sharegpt", "custom":
		if *dataset == "" {
			return "", "", fmt.Errorf("--dataset-name %s needs --dataset-path FILE", v.datasetName)
		}
	default:
		return "", "", fmt.Errorf("--dataset-name %q: expected random, sharegpt or custom", v.datasetName)
	}
	if v.percentileMetrics != "" {
		for _, m := range strings.Split(v.percentileMetrics, ",") {
			switch strings.TrimSpace(m) {
			case "ttft", "tpot", "itl", "e2el":
			default:
				return "", "", fmt.Errorf("--percentile-metrics: %q: expected ttft, tpot, itl or e2el", m)
			}
		}
	}
	if v.metricPercents != "" {
		for _, p := range strings.Split(v.metricPercents, ",") {
			x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil || (x != 50 && x != 90 && x != 95 && x != 99) {
				return "", "", fmt.Errorf("--metric-percentiles: %q: reckon reports the percentiles 50 (median), 90, 95 and 99; expected some of those", p)
			}
		}
	}
	if v.resultFilename != "" {
		result = v.resultFilename
	}
	if v.saveResult && result == "" {
		result = vllmResultName(o)
	}
	if v.resultDir != "" {
		if result == "" {
			return "", "", fmt.Errorf("--result-dir %s: also give --save-result or --result-filename", v.resultDir)
		}
		if !filepath.IsAbs(result) {
			result = filepath.Join(v.resultDir, result)
		}
	}
	if f.Changed("ignore-eos") && f.Changed("no-ignore-eos") {
		return "", "", fmt.Errorf("--ignore-eos and --no-ignore-eos contradict each other: give one")
	}
	if f.Changed("top-p") && !(v.topP > 0 && v.topP <= 1) {
		return "", "", fmt.Errorf("--top-p %v: expected a number in (0, 1]", v.topP)
	}
	if f.Changed("temperature") && (v.temperature < 0 || math.IsNaN(v.temperature)) {
		return "", "", fmt.Errorf("--temperature %v: expected a number >= 0", v.temperature)
	}
	return url, result, nil
}

// vllmResultName is vLLM's default result file name:
// {backend}-{request_rate}qps[-concurrency{N}]-{model_basename}-{YYYYmmdd-HHMMSS}.json.
func vllmResultName(o *workload.Options) string {
	rate := "inf"
	if o.RequestRate > 0 && !math.IsInf(o.RequestRate, 1) {
		rate = strconv.FormatFloat(o.RequestRate, 'g', -1, 64)
	}
	name := "reckon-" + rate + "qps"
	if o.Concurrency > 0 {
		name += fmt.Sprintf("-concurrency%d", o.Concurrency)
	}
	if o.Model != "" {
		name += "-" + filepath.Base(o.Model)
	}
	return name + "-" + time.Now().Format("20060102-150405") + ".json"
}
