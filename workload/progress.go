// progress.go holds the run's progress report (a bar on a terminal, a line every 10% otherwise).

package workload

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress reports completions: a bar on a terminal, a plain line every 10% otherwise.
type progress struct {
	mu     sync.Mutex
	bar    *progressbar.ProgressBar
	w      io.Writer
	total  int
	done   int
	failed int
	next   int
	start  time.Time
}

func newProgress(w io.Writer, total int) *progress {
	if w == nil || total == 0 {
		return nil
	}
	p := &progress{w: w, total: total, start: time.Now(), next: max(1, total/10)}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("requests"),
			progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish())
	}
	return p
}

func (p *progress) add(ok bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if !ok {
		p.failed++
	}
	if p.bar != nil {
		_ = p.bar.Add(1)
		return
	}
	if p.done >= p.next || p.done == p.total {
		fmt.Fprintf(p.w, "bench: %d/%d requests done (%d failed) in %.1fs\n", p.done, p.total, p.failed, time.Since(p.start).Seconds())
		p.next += max(1, p.total/10)
	}
}

func (p *progress) finish() {
	if p == nil || p.bar == nil {
		return
	}
	_ = p.bar.Finish()
}
