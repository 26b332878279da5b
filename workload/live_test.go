package workload

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/engine/client"
)

// TestLiveServer runs the probe and a short benchmark against a real server when
// RECKON_LIVE_URL is set (for example a reference engine started by hand); skipped otherwise.
func TestLiveServer(t *testing.T) {
	url := os.Getenv("RECKON_LIVE_URL")
	if url == "" {
		t.Skip("RECKON_LIVE_URL not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := client.New(url, client.Options{Timeout: time.Minute})
	prompts, err := LoadPrompts("../fixtures/prompts/numerics.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	p, err := RunNumericsProbe(ctx, c, prompts[:4], 8, 5)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	for _, np := range p.Prompts {
		if len(np.Output) != 8 || len(np.PromptLogprobs) == 0 {
			t.Errorf("prompt %s: %d outputs, %d prompt logprobs", np.ID, len(np.Output), len(np.PromptLogprobs))
		}
		for _, o := range np.Output {
			if o.Token == UnknownToken || len(o.Top) == 0 {
				t.Errorf("prompt %s: output entry %+v lacks an id or top-k", np.ID, o)
				break
			}
		}
	}
	if out := os.Getenv("RECKON_LIVE_PROBE_OUT"); out != "" {
		p.Config = "live"
		if err := WriteNumericsProbe(out, p); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Run(ctx, c, Options{Concurrency: 4, NumPrompts: 12, InputLen: 16, OutputLen: 8, IgnoreEOS: true})
	if err != nil || res.Completed != 12 || res.TotalOutputTokens != 96 {
		t.Errorf("bench: %v %+v", err, res)
	}
}
