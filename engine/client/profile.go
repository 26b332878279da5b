package client

import (
	"context"
	"net/http"
	"time"
)

// ProfileStopTimeout bounds POST /stop_profile: the engine writes its traces before it answers
// ("Stop profiling. This will take some time.").
const ProfileStopTimeout = 2 * time.Minute

// profileRequest is SGLang's ProfileReqInput (io_struct.py); vLLM's /start_profile takes no body
// and ignores one (its trace directory is fixed at launch: VLLM_TORCH_PROFILER_DIR or
// --profiler-config).
type profileRequest struct {
	OutputDir  string   `json:"output_dir,omitempty"`
	Activities []string `json:"activities,omitempty"`
}

// StartProfile starts the engine's torch profiler (POST /start_profile), asking SGLang to write
// the traces into outputDir (one file per TP rank). A server without profiling answers 404: the
// error is an *APIError.
func (c *Client) StartProfile(ctx context.Context, outputDir string) error {
	return c.doMeta(ctx, http.MethodPost, "/start_profile", profileRequest{OutputDir: outputDir, Activities: []string{"CPU", "GPU"}}, nil)
}

// StopProfile stops the profiler (POST /stop_profile); the engine has written its traces when it
// answers. It is bounded by ProfileStopTimeout (and ctx).
func (c *Client) StopProfile(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ProfileStopTimeout)
	defer cancel()
	return c.doJSON(ctx, http.MethodPost, "/stop_profile", struct{}{}, nil)
}
