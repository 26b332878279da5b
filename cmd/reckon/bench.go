package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/workload"
)

func init() { rootCmd.AddCommand(newBenchCmd()) }

func newBenchCmd() *cobra.Command {
	var (
		url, rate, dataset, result, model, engine, config, testbed string
		o                                                          workload.Options
		goodput, labels                                            []string
		noIgnoreEOS, ignoreEOS, quiet                              bool
		v                                                          vllmFlags
		metadataTimeout                                            time.Duration
		maxEventBytes                                              int
	)
	cmd := &cobra.Command{
		Use:   "bench --url URL --result FILE [flags]",
		Short: "Benchmark a running OpenAI-compatible server (vLLM bench serve metrics)",
		Long: `Drive a running server (SGLang, vLLM or the reference engine) with streamed /v1/completions
requests and write a result file with vLLM bench serve's metric names (docs/metrics.md).

Closed loop: --concurrency N keeps N requests in flight. Open loop: --request-rate R sends
requests at Poisson times (--burstiness < 1 burstier, gamma-distributed), capped by --concurrency
when both are given. Prompts come from --dataset (JSONL {"prompt": ...} / {"prompt_token_ids": [...]},
or ShareGPT JSON, whose replies set the output lengths unless --output-len is given) or are
synthetic: --input-len tokens exactly (plus a shared --prefix-len prefix), sent as token ids, or,
when the server refuses ids, as text calibrated by the server's own usage counts (the result's
metadata.workload.prompt_mode says which; details.input_lens holds every request's real length).
As current vllm bench serve: requests carry no temperature unless --temperature (the server's
default applies; --temperature 0 for greedy), and synthetic (random) prompts ask for exactly
their output length (ignore_eos; --no-ignore-eos lets them stop at end-of-sequence), dataset
prompts only with --ignore-eos. Warm-up requests are excluded; failed requests are counted,
never fatal. max_concurrent_requests is the exact peak of successful requests in flight, as
current vLLM; max_concurrent_requests_1s the busiest whole second (vLLM's figure up to 0.28).

vLLM's bench serve flag names are accepted with vLLM's meaning: --base-url (or --host/--port),
--max-concurrency, --random-input-len, --random-output-len, --random-range-ratio,
--random-prefix-len, --dataset-name random|sharegpt|custom, --dataset-path, --num-warmups,
--save-result with --result-dir/--result-filename, --save-detailed, --percentile-metrics,
--metric-percentiles, --metadata KEY=VALUE..., --ignore-eos, --top-p, --disable-tqdm. Result files
use vLLM's key names.

Every network call has a deadline: --request-timeout for each completion, --metadata-timeout for
/v1/models and /server_info. A stream that goes on past max_tokens (plus a margin) or sends an
event larger than --max-event-bytes fails its request (docs/reliability.md).

Exit status: 0 done, 2 bad flags, dataset or --result path (checked before the first request),
3 server unreachable or no request succeeded.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// vLLM's --goodput takes several values ("--goodput ttft:200 tpot:50"): accept the
			// values that follow it as positional arguments.
			// The same for --metadata KEY=VALUE ... (vLLM's nargs).
			for _, a := range args {
				switch {
				case cmd.Flags().Changed("goodput") && strings.Contains(a, ":") && !strings.Contains(a, "="):
					goodput = append(goodput, a)
				case cmd.Flags().Changed("metadata") && strings.Contains(a, "="):
					labels = append(labels, a)
				default:
					return withExitCode(2, fmt.Errorf("unexpected argument %q", a))
				}
			}
			var err error
			if o.RequestRate, err = parseRate(rate); err != nil {
				return withExitCode(2, err)
			}
			o.Model = model
			if url, result, err = v.apply(cmd, url, result, &o, &dataset); err != nil {
				return withExitCode(2, err)
			}
			if url == "" {
				return withExitCode(2, fmt.Errorf("--url is required (e.g. http://127.0.0.1:30000; vLLM's --base-url or --host/--port also work)"))
			}
			if result == "" {
				return withExitCode(2, fmt.Errorf("--result FILE is required (or vLLM's --save-result [--result-dir DIR] [--result-filename FILE])"))
			}
			// Before the benchmark, not after it: a result that cannot be written is lost work.
			if err := checkWritable(result); err != nil {
				return withExitCode(2, fmt.Errorf("--result %s: %w", result, err))
			}
			if metadataTimeout <= 0 {
				return withExitCode(2, fmt.Errorf("--metadata-timeout %v: expected a positive duration", metadataTimeout))
			}
			if maxEventBytes <= 0 {
				return withExitCode(2, fmt.Errorf("--max-event-bytes %d: expected a positive number of bytes", maxEventBytes))
			}
			if o.RequestTimeout < 0 {
				return withExitCode(2, fmt.Errorf("--request-timeout %v: expected a positive duration (0: none)", o.RequestTimeout))
			}
			if ignoreEOS && noIgnoreEOS {
				return withExitCode(2, fmt.Errorf("--ignore-eos and --no-ignore-eos contradict each other: give one"))
			}
			if len(goodput) > 0 {
				if o.Goodput, err = workload.ParseGoodput(goodput); err != nil {
					return withExitCode(2, err)
				}
			}
			o.Dataset = dataset
			o.Model = model
			// vllm bench serve forces ignore_eos for its random dataset (serve.py main_async);
			// reckon keeps --no-ignore-eos as a way out.
			o.IgnoreEOS = ignoreEOS || (dataset == "" && !noIgnoreEOS)
			// ... and no longer sends temperature 0 unless asked: the server's default applies.
			o.ServerDefaultTemperature = true
			if cmd.Flags().Changed("temperature") {
				o.Temperature = &v.temperature
			}
			if cmd.Flags().Changed("top-p") {
				o.TopP = &v.topP
			}
			o.Metadata.Engine, o.Metadata.Config, o.Metadata.Testbed = engine, config, testbed
			for _, l := range labels {
				k, v, ok := strings.Cut(l, "=")
				if !ok || k == "" {
					return withExitCode(2, fmt.Errorf("--label %q: expected KEY=VALUE", l))
				}
				if o.Metadata.Labels == nil {
					o.Metadata.Labels = map[string]string{}
				}
				o.Metadata.Labels[k] = v
			}
			if !quiet && !v.disableTqdm {
				o.Progress = os.Stderr
			}
			workload.Version = version
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			c := client.New(url, client.Options{Model: model, MetadataTimeout: metadataTimeout, MaxEventBytes: maxEventBytes})
			if model == "" {
				if _, err := c.ResolveModel(ctx); err != nil {
					return withExitCode(3, fmt.Errorf("server %s: %w", url, err))
				}
			}
			start := time.Now()
			res, runErr := workload.Run(ctx, c, o)
			if res == nil {
				if errors.Is(runErr, workload.ErrBadOptions) {
					return withExitCode(2, runErr)
				}
				return withExitCode(3, runErr)
			}
			if err := workload.WriteResult(result, res); err != nil {
				return withExitCode(3, err)
			}
			logrus.Infof("bench: %d requests in %s, result written to %s", res.Completed+res.Failed, time.Since(start).Round(time.Millisecond), result)
			printSummary(cmd.OutOrStdout(), res)
			if runErr != nil {
				return withExitCode(3, runErr)
			}
			if res.Completed == 0 {
				return withExitCode(3, fmt.Errorf("no request succeeded (%d failed)", res.Failed))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "server base URL, e.g. http://127.0.0.1:30000")
	f.IntVar(&o.Concurrency, "concurrency", 0, "requests in flight at most (closed loop when no --request-rate); 0 = no cap")
	f.StringVar(&rate, "request-rate", "inf", "mean requests per second (Poisson arrivals); inf = all at once")
	f.Float64Var(&o.Burstiness, "burstiness", 1, "gamma shape of inter-arrival times (1 = Poisson; < 1 burstier)")
	f.IntVar(&o.NumPrompts, "num-prompts", workload.DefaultNumPrompts, "number of benchmark requests (warm-up not included)")
	f.IntVar(&o.InputLen, "input-len", 0, fmt.Sprintf("synthetic prompt length in tokens (default %d)", workload.DefaultInputLen))
	f.IntVar(&o.PrefixLen, "prefix-len", 0, "a shared prefix of this many tokens before every synthetic prompt")
	f.StringVar(&o.PromptMode, "prompt-mode", workload.PromptAuto, "synthetic prompts as token ids (token_ids), calibrated text (text), or ids when the server takes them (auto)")
	f.IntVar(&o.OutputLen, "output-len", 0, fmt.Sprintf("tokens to generate per request (default: dataset's, else %d)", workload.DefaultOutputLen))
	f.Float64Var(&o.RangeRatio, "range-ratio", 0, "spread lengths uniformly over [L(1-r), L(1+r)], r in [0,1)")
	f.StringVar(&dataset, "dataset", "", "prompt file: JSONL {\"prompt\": ...} or {\"prompt_token_ids\": [...]}, or ShareGPT JSON")
	f.IntVar(&o.Warmup, "warmup", 0, "warm-up requests sent first and excluded from the metrics")
	f.Int64Var(&o.Seed, "seed", 0, "seed for prompts, lengths and arrival times")
	f.StringSliceVar(&goodput, "goodput", nil, "SLOs for goodput in ms: ttft:MS tpot:MS e2el:MS")
	f.DurationVar(&o.RequestTimeout, "request-timeout", 10*time.Minute, "timeout of one request (counted as failed)")
	f.StringVar(&result, "result", "", "result file to write (JSON, vLLM key names)")
	f.StringVar(&model, "model", "", "model name to send (default: the first of /v1/models)")
	f.BoolVar(&ignoreEOS, "ignore-eos", false, "ask for exactly the output length (ignore_eos); the default for synthetic (random) prompts, as vLLM")
	f.BoolVar(&noIgnoreEOS, "no-ignore-eos", false, "let requests stop at end-of-sequence (the default for --dataset prompts)")
	f.Float64Var(&v.temperature, "temperature", 0, "sampling temperature sent with every request (default: none sent, the server's default, as vLLM; 0 = greedy)")
	f.Float64Var(&v.topP, "top-p", 1, "nucleus sampling top_p (default: the server's)")
	f.BoolVar(&o.Details, "details", false, "keep per-request data in the result (ttfts, itls, ...)")
	f.StringVar(&engine, "engine", "", "metadata: engine name")
	f.StringVar(&config, "config", "", "metadata: configuration name")
	f.StringVar(&testbed, "testbed", "", "metadata: testbed fingerprint")
	f.StringArrayVar(&labels, "label", nil, "metadata KEY=VALUE (repeatable)")
	f.BoolVar(&quiet, "quiet", false, "no progress output")
	f.DurationVar(&metadataTimeout, "metadata-timeout", client.DefaultMetadataTimeout, "timeout of one metadata request (/v1/models, /server_info)")
	f.IntVar(&maxEventBytes, "max-event-bytes", client.DefaultMaxEventBytes, "largest server-sent event accepted; a longer one fails its request")
	v.register(cmd, &o, &labels)
	return cmd
}

// checkWritable checks that a file can be created at path (its directory exists and takes a new
// file; path itself is not a directory) without touching an existing file there.
func checkWritable(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("is a directory, expected a file path")
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".reckon-bench-*.tmp")
	if err != nil {
		return fmt.Errorf("directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
	return nil
}

// parseRate reads --request-rate: a positive number or inf.
func parseRate(s string) (float64, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "inf" || s == "infinity" || s == "" {
		return 0, nil
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || r <= 0 || math.IsNaN(r) {
		return 0, fmt.Errorf("--request-rate %q: expected a positive number of requests per second, or inf", s)
	}
	if math.IsInf(r, 1) {
		return 0, nil
	}
	return r, nil
}
