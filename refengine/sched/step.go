// step.go holds the scheduler's step: one prefill or decode batch, its device pacing, and
// the prefill path with its KV growth and release.

package sched

import (
	"context"
	"fmt"
	"time"

	"github.com/reckon-ci/reckon/refengine/device"
	"github.com/reckon-ci/reckon/refengine/tp"
)

// step runs one prefill or decode batch. contiguous says it follows the previous step without an
// idle wait (the device clock then starts it at the previous step's modelled end); otherwise ready
// is when the work that ended the idle wait arrived (the device clock starts the step there).
func (s *Scheduler) step(ctx context.Context, contiguous bool, ready time.Time) error {
	start := time.Now()
	var dstep device.Step
	if s.cfg.Device != nil {
		dstep = s.cfg.Device.Pacer.BeginReady(contiguous, ready)
		s.cost = device.StepCost{}
	}
	// drop cancelled requests
	live := s.running[:0]
	for _, q := range s.running {
		if q.req.Ctx.Err() != nil {
			s.release(q)
			s.finish(q, "abort", nil)
			continue
		}
		live = append(live, q)
	}
	s.mu.Lock()
	s.running = live
	s.mu.Unlock()
	if len(live) == 0 {
		return nil
	}
	var err error
	if s.needsPrefill() {
		err = s.prefill()
	} else {
		err = s.decode()
	}
	if err != nil {
		return err
	}
	if s.cfg.Device != nil {
		s.paceDevice(ctx, dstep)
	} else {
		s.pace(ctx, time.Since(start))
	}
	s.mu.Lock()
	kept := s.running[:0]
	for _, q := range s.running {
		if !q.done {
			kept = append(kept, q)
		}
	}
	s.running = kept
	used := 0
	for _, q := range kept {
		used += len(q.tokens)
	}
	s.st.UsedTokens = used
	s.mu.Unlock()
	return nil
}

// pace adds the modelled communication time and the slowdown fault to the step: it sleeps once
// the accumulated debt is worth a sleep, so the average step time is right.
func (s *Scheduler) pace(ctx context.Context, compute time.Duration) {
	comm := s.group.TakeCommTime()
	var extra time.Duration
	if s.cfg.Slowdown > 1 {
		extra = time.Duration(float64(compute) * (s.cfg.Slowdown - 1))
	}
	s.debt += comm + extra
	s.mu.Lock()
	s.st.CommTime += comm
	s.st.FaultDelay += extra
	s.mu.Unlock()
	if s.debt < 500*time.Microsecond {
		return
	}
	t0 := time.Now()
	tm := time.NewTimer(s.debt)
	select {
	case <-tm.C:
	case <-ctx.Done():
		tm.Stop()
	}
	s.debt -= time.Since(t0)
}

// paceDevice ends a step on the modelled device clock: the real allreduces' communication time
// (the real model's) is dropped, the modelled model's is in s.cost; the step lasts the longer of
// its real compute and its modelled time (slowdown and noise applied).
func (s *Scheduler) paceDevice(ctx context.Context, st device.Step) {
	s.group.TakeCommTime()
	dc := s.cfg.Device
	r := dc.Pacer.End(ctx, st, s.cost.Total())
	s.mu.Lock()
	s.st.CommTime += s.cost.Comm
	s.st.DeviceCompute += s.cost.Compute
	if s.cfg.Slowdown > 1 {
		s.st.FaultDelay += time.Duration(float64(s.cost.Total()) * (s.cfg.Slowdown - 1))
	}
	s.mu.Unlock()
	if !r.Overrun {
		return
	}
	every := dc.OverrunLogEvery
	if every <= 0 {
		every = 10 * time.Second
	}
	ps := dc.Pacer.Stats()
	if now := time.Now(); ps.Overruns > s.loggedOverrun && (s.loggedOverrun == 0 || now.Sub(s.lastOverrunAt) >= every) {
		s.cfg.Logf("Device clock: CPU compute overran the modelled step time in %d of %d steps (this step: real %.2f ms, modelled %.2f ms); throughput now depends on this machine's load",
			ps.Overruns, ps.Steps, float64(r.Real)/1e6, float64(r.Target)/1e6)
		s.loggedOverrun = ps.Overruns
		s.lastOverrunAt = now
	}
}

// forward runs model m over batch on the group and, on the modelled clock, adds the modelled
// model's cost of the same work to the step.
func (s *Scheduler) forward(m tp.ModelID, batch []tp.SeqInput) ([][]float32, error) {
	out, err := s.group.Forward(m, batch)
	if err != nil || s.cfg.Device == nil {
		return out, err
	}
	s.cost = s.cost.Add(s.cfg.Device.Timer.Forward(WorkOf(m, batch)))
	return out, nil
}

// WorkOf describes a forward of model m over batch for the device clock.
func WorkOf(m tp.ModelID, batch []tp.SeqInput) device.Work {
	w := device.Work{Draft: m == tp.Draft}
	for _, b := range batch {
		n := len(b.Tokens)
		ctx := int64(b.Start + n)
		w.Tokens += n
		w.ContextTokens += ctx
		w.AttnPairs += int64(n) * ctx
		switch b.Logits {
		case tp.LogitsLast:
			w.LogitRows++
		case tp.LogitsAll:
			w.LogitRows += n
		}
	}
	return w
}

func (s *Scheduler) needsPrefill() bool {
	for _, q := range s.running {
		if q.kvLen < q.promptLen {
			return true
		}
	}
	return false
}

func (s *Scheduler) grow(q *seq, n int) error {
	p, err := s.alloc.Grow(q.pages, n)
	if err != nil {
		return fmt.Errorf("request %s: %w", q.req.ID, err)
	}
	q.pages = p
	return nil
}

func (s *Scheduler) release(q *seq) {
	s.alloc.Release(q.pages)
	q.pages = nil
	s.mu.Lock()
	s.reserved -= q.reserve
	// Keep the published usage in step with the pool: a request's last token reaches its client
	// before the step ends and recomputes the counters.
	s.st.UsedTokens = max(0, s.st.UsedTokens-len(q.tokens))
	s.mu.Unlock()
	q.reserve = 0
}

func (s *Scheduler) prefill() error {
	budget := s.cfg.ChunkedPrefill
	var batch []tp.SeqInput
	var members []*seq
	newSeqs, newTokens := 0, 0
	for _, q := range s.running {
		if q.kvLen >= q.promptLen || budget == 0 {
			continue
		}
		n := min(q.promptLen-q.kvLen, budget)
		budget -= n
		if err := s.grow(q, q.kvLen+n+s.lookahead()); err != nil {
			return err
		}
		mode := tp.LogitsNone
		if q.req.PromptLogprobs {
			mode = tp.LogitsAll
		} else if q.kvLen+n == q.promptLen {
			mode = tp.LogitsLast
		}
		if q.kvLen == 0 {
			newSeqs++
		}
		newTokens += n
		batch = append(batch, tp.SeqInput{Tokens: q.tokens[q.kvLen : q.kvLen+n], Start: q.kvLen, Pages: q.pages, Logits: mode})
		members = append(members, q)
	}
	logits, err := s.forward(tp.Target, batch)
	if err != nil {
		return err
	}
	if s.cfg.Spec != nil {
		db := make([]tp.SeqInput, len(batch))
		for i, b := range batch {
			b.Logits = tp.LogitsNone
			db[i] = b
		}
		if _, err := s.forward(tp.Draft, db); err != nil {
			return err
		}
	}
	row := 0
	for i, q := range members {
		b := batch[i]
		n := len(b.Tokens)
		var last []float32
		switch b.Logits {
		case tp.LogitsAll:
			for j := 0; j < n; j++ {
				pos := b.Start + j
				if pos+1 < q.promptLen {
					lp := logprobsOf(logits[row+j], q.tokens[pos+1], q.req.TopLogprobs)
					q.promptLP = append(q.promptLP, lp)
				}
			}
			last = logits[row+n-1]
			row += n
		case tp.LogitsLast:
			last = logits[row]
			row++
		}
		q.kvLen += n
		q.draftLen = q.kvLen
		if q.kvLen == q.promptLen {
			if q.req.PromptLogprobs {
				q.req.out <- Event{Prompt: q.promptLP}
			}
			if q.req.MaxNew == 0 {
				s.complete(q, "length")
				continue
			}
			tok := s.sample(q, last)
			s.commit(q, tok, last)
		}
	}
	s.mu.Lock()
	s.st.PrefillSteps++
	s.st.PromptTokensTotal += int64(newTokens)
	usage := float64(s.usedTokensLocked()) / float64(max(1, s.alloc.CapacityTokens()))
	running, queued := len(s.running), len(s.waiting)
	s.mu.Unlock()
	s.cfg.Logf("Prefill batch, #new-seq: %d, #new-token: %d, #cached-token: 0, token usage: %.2f, #running-req: %d, #queue-req: %d, ",
		newSeqs, newTokens, usage, running-newSeqs, queued)
	return nil
}

func (s *Scheduler) usedTokensLocked() int {
	n := s.leaked * s.alloc.PageSize()
	for _, q := range s.running {
		n += len(q.tokens)
	}
	return n
}
