// serve.go holds the engine's life once built: Serve, the warm-up request, readiness, and
// the crash faults that end it.

package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/reckon-ci/reckon/refengine/model"
	"github.com/reckon-ci/reckon/refengine/sched"
)

// Serve runs the scheduler and the HTTP server on ln until ctx is done (clean shutdown, nil) or
// the engine fails (the error).
func (e *Engine) Serve(ctx context.Context, ln net.Listener) error {
	schedCtx, cancelSched := context.WithCancel(context.Background())
	defer cancelSched()
	schedDone := make(chan error, 1)
	go func() { schedDone <- e.Sched.Run(schedCtx) }()
	srv := &http.Server{Handler: e.Handler(), ReadHeaderTimeout: 10 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	addr := ln.Addr().(*net.TCPAddr)
	vllm := e.Opts.Dialect == DialectVLLM
	if !vllm {
		e.Log.Uvicorn("INFO:     Started server process [%d]", os.Getpid())
		e.Log.Uvicorn("INFO:     Waiting for application startup.")
		e.Log.Uvicorn("INFO:     Application startup complete.")
		e.Log.Uvicorn("INFO:     Uvicorn running on http://%s (Press CTRL+C to quit)", net.JoinHostPort(e.Opts.Host, fmt.Sprint(addr.Port)))
	}
	switch {
	case e.Opts.FaultHangStartup && vllm:
		e.vlog(tagEngineCore, levelWarning, locRefengine, "Fault injection: --fault-hang-startup: the engine will never finish initialising.")
	case e.Opts.FaultHangStartup:
		e.Log.Info("Fault injection: --fault-hang-startup: the server will never become ready.")
	case vllm:
		// The stats loop started after the warmup ends with Serve, whatever ends it.
		vctx, vcancel := context.WithCancel(ctx)
		defer vcancel()
		go e.vllmWarmup(vctx, addr)
	default:
		go e.warmup(ctx)
	}
	var failure error
	select {
	case <-ctx.Done():
		if vllm {
			e.Log.VLLMUvicorn(tagAPIServer, "INFO:     Shutting down")
		} else {
			e.Log.Info("Received shutdown signal; stopping (in-flight requests get up to 2 s to finish).")
		}
	case err := <-schedDone:
		failure = fmt.Errorf("scheduler stopped: %w", err)
		if vllm {
			e.vllmFatal("Scheduler.Run", err)
		} else {
			e.Log.Error("Scheduler hit an exception: %v", err)
		}
		schedDone <- err
	case err := <-httpDone:
		failure = fmt.Errorf("http server stopped: %w", err)
		httpDone <- err
	case err := <-e.fatal:
		failure = err
	}
	e.ready.Store(false)
	shCtx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	grace := time.AfterFunc(2*time.Second, func() { e.Sched.Close() })
	defer grace.Stop()
	if failure != nil {
		e.Sched.Close()
		srv.Close()
	} else {
		_ = srv.Shutdown(shCtx)
	}
	cancelSched()
	select {
	case <-schedDone:
	case <-shCtx.Done():
	}
	if failure == nil {
		if vllm {
			e.Log.VLLMUvicorn(tagAPIServer, "INFO:     Waiting for application shutdown.")
			e.Log.VLLMUvicorn(tagAPIServer, "INFO:     Application shutdown complete.")
			e.Log.VLLMUvicorn(tagAPIServer, "INFO:     Finished server process [%d]", os.Getpid())
		} else {
			e.Log.Info("Shutdown complete.")
		}
	}
	return failure
}

// vllmWarmup is the vLLM dialect's end of engine init: one request through the scheduler (vLLM's
// warmup run), then the API server's start-up lines, readiness and the periodic stats.
func (e *Engine) vllmWarmup(ctx context.Context, addr *net.TCPAddr) {
	if err := e.generateOne(ctx); err != nil {
		if ctx.Err() == nil {
			e.vllmFatal("warmup", err)
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	e.vllmReady(addr)
	e.ready.Store(true)
	go e.vllmStatsLoop(ctx)
}

// warmup sends one short request through the whole path, then declares the server ready.
func (e *Engine) warmup(ctx context.Context) {
	if !e.Opts.SkipWarmup {
		if err := e.generateOne(ctx); err != nil {
			e.Log.Error("Warmup failed: %v", err)
			return
		}
	}
	if ctx.Err() != nil {
		return
	}
	e.ready.Store(true)
	e.Log.Info("The server is fired up and ready to roll!")
}

// generateOne runs a one-token greedy request through the scheduler (warmup, /health_generate).
func (e *Engine) generateOne(ctx context.Context) error {
	req := &sched.Request{ID: "warmup", Prompt: model.Encode("The capital city of France is"), MaxNew: 1, Ctx: ctx}
	if err := e.Sched.Submit(req); err != nil {
		return err
	}
	var last sched.Event
	for ev := range req.Events() {
		last = ev
	}
	if last.FinishReason == "abort" {
		return errors.New("the request was aborted")
	}
	return last.Err
}

// Ready reports whether the server has finished its warmup.
func (e *Engine) Ready() bool { return e.ready.Load() }

// crashDue counts an arriving generation request and reports whether the crash fault fires:
// with --fault-crash-after N, the first N requests are served and the next one crashes the
// engine (Python-style traceback in the log, exit 1), as a scheduler exception would.
func (e *Engine) crashDue() bool {
	c := e.Opts.FaultCrashAfter
	if c <= 0 {
		return false
	}
	n := e.served.Add(1)
	if n <= int64(c) {
		return false
	}
	e.fatalOnce.Do(func() {
		if e.Opts.Dialect == DialectVLLM {
			e.vllmFatal("Engine.crashDue", fmt.Errorf("refengine fault injection: --fault-crash-after %d reached (%d requests served)", c, c))
			e.fatal <- fmt.Errorf("fault injection: crashed after %d requests", c)
			return
		}
		e.Log.Error("%s", "Scheduler hit an exception: Traceback (most recent call last):\n"+
			"  File \"refengine/server/server.go\", in Engine.crashDue\n"+
			"    fault injection\n"+
			fmt.Sprintf("RuntimeError: refengine fault injection: --fault-crash-after %d reached (%d requests served)", c, c))
		e.Log.Error("Received sigquit from a child process. It usually means the child failed.")
		e.fatal <- fmt.Errorf("fault injection: crashed after %d requests", c)
	})
	return true
}

// failDue counts an arriving generation request and reports whether the failure fault fires:
// with --fault-fail-every N, every N-th request of the launch (only of launch index
// --fault-fail-launch when given) fails before it is scheduled.
func (e *Engine) failDue() bool {
	n := e.Opts.FaultFailEvery
	if n <= 0 || e.Opts.FaultFailLaunch >= 0 && uint64(e.Opts.FaultFailLaunch) != e.Launch {
		return false
	}
	return e.arrived.Add(1)%int64(n) == 0
}

// failRequest answers a request the failure fault fails the way a generation that raised inside
// the engine is answered: HTTP 500 with the OpenAI-style error body (vLLM's create_error_response,
// vllm-project/vllm vllm/entrypoints/openai/serving_engine.py at 7ded96b3: "return
// ErrorResponse(error=ErrorInfo(message=message, type=err_type, code=status_code.value))"), and an
// error record in the log.
func (e *Engine) failRequest(w http.ResponseWriter) {
	msg := fmt.Sprintf("refengine fault injection: --fault-fail-every %d: request failed", e.Opts.FaultFailEvery)
	if e.Opts.Dialect == DialectVLLM {
		e.vlog(tagEngineCore, levelError, locRefengine, "%s", msg)
	} else {
		e.Log.Error("%s", msg)
	}
	writeError(w, http.StatusInternalServerError, "InternalServerError", msg)
}

// hangUp drops the client's connection without an answer (what a crashed server does).
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	writeError(w, http.StatusInternalServerError, "InternalServerError", "the engine crashed")
}
