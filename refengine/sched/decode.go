// decode.go holds the decode paths (plain and EAGLE-style speculative), sampling with
// logprobs, and how a generated token is committed and a request finished.

package sched

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/refengine/model"
	"github.com/reckon-ci/reckon/refengine/tp"
)

// decode runs one decode step (or one draft+verify round) for every running request.
func (s *Scheduler) decode() error {
	var members []*seq
	for _, q := range s.running {
		if !q.done {
			members = append(members, q)
		}
	}
	if len(members) == 0 {
		return nil
	}
	committed := 0
	plain := members
	if s.cfg.Spec != nil {
		var spec []*seq
		plain = nil
		for _, q := range members {
			if q.req.NoSpec {
				plain = append(plain, q)
			} else {
				spec = append(spec, q)
			}
		}
		if len(spec) > 0 {
			c, err := s.specDecode(spec)
			if err != nil {
				return err
			}
			committed = c
		}
	}
	if len(plain) > 0 {
		members := plain
		batch := make([]tp.SeqInput, len(members))
		for i, q := range members {
			if err := s.grow(q, len(q.tokens)); err != nil {
				return err
			}
			batch[i] = tp.SeqInput{Tokens: q.tokens[q.kvLen:], Start: q.kvLen, Pages: q.pages, Logits: tp.LogitsLast}
		}
		logits, err := s.forward(tp.Target, batch)
		if err != nil {
			return err
		}
		for i, q := range members {
			q.kvLen = len(q.tokens)
			tok := s.sample(q, logits[i])
			s.commit(q, tok, logits[i])
			committed++
		}
	}
	s.winTokens += committed
	s.decSteps++
	s.mu.Lock()
	s.st.DecodeSteps++
	s.mu.Unlock()
	if s.cfg.DecodeLogEvery > 0 && s.decSteps%s.cfg.DecodeLogEvery == 0 {
		s.logDecode(len(members))
	}
	return nil
}

func (s *Scheduler) logDecode(bs int) {
	el := time.Since(s.winStart).Seconds()
	thr := 0.0
	if el > 0 {
		thr = float64(s.winTokens) / el
	}
	s.mu.Lock()
	s.st.LastGenThroughput = thr
	used := s.usedTokensLocked()
	queued := len(s.waiting)
	running := len(s.running)
	s.mu.Unlock()
	capTok := max(1, s.alloc.CapacityTokens())
	accept := ""
	if s.cfg.Spec != nil {
		al := 0.0
		if s.winAccept[1] > 0 {
			al = float64(s.winAccept[0]) / float64(s.winAccept[1])
		}
		accept = fmt.Sprintf("accept len: %.2f, ", al)
	}
	graph := "True"
	if s.cfg.DisableGraph || bs > s.cfg.CUDAGraphMaxBS {
		graph = "False"
	}
	s.cfg.Logf("Decode batch, #running-req: %d, #token: %d, token usage: %.2f, %scuda graph: %s, gen throughput (token/s): %.2f, #queue-req: %d, ",
		running, used, float64(used)/float64(capTok), accept, graph, thr, queued)
	s.winStart = time.Now()
	s.winTokens = 0
	s.winAccept = [2]int{}
}

// specDecode runs one draft-then-verify round for members and returns the tokens committed.
func (s *Scheduler) specDecode(members []*seq) (int, error) {
	k := s.cfg.Spec.NumSteps
	drafts := make([][]int, len(members))
	if s.cfg.Device != nil {
		s.cost = s.cost.Add(s.cfg.Device.Timer.SpecRound())
	}
	for _, q := range members {
		if err := s.grow(q, len(q.tokens)+k); err != nil {
			return 0, err
		}
	}
	// Draft: catch up on committed tokens not yet in the draft KV, then extend greedily.
	for step := 0; step < k; step++ {
		batch := make([]tp.SeqInput, len(members))
		for i, q := range members {
			if step == 0 {
				batch[i] = tp.SeqInput{Tokens: q.tokens[q.draftLen:], Start: q.draftLen, Pages: q.pages}
			} else {
				batch[i] = tp.SeqInput{Tokens: drafts[i][step-1 : step], Start: len(q.tokens) + step - 1, Pages: q.pages}
			}
		}
		logits, err := s.forward(tp.Draft, batch)
		if err != nil {
			return 0, err
		}
		for i := range members {
			drafts[i] = append(drafts[i], argmax(logits[i]))
		}
	}
	// Verify: the target scores the last committed token(s) and all draft tokens in one pass.
	batch := make([]tp.SeqInput, len(members))
	for i, q := range members {
		in := append(append([]int(nil), q.tokens[q.kvLen:]...), drafts[i]...)
		batch[i] = tp.SeqInput{Tokens: in, Start: q.kvLen, Pages: q.pages, Logits: tp.LogitsAll}
	}
	logits, err := s.forward(tp.Target, batch)
	if err != nil {
		return 0, err
	}
	committed := 0
	row := 0
	for i, q := range members {
		n := len(batch[i].Tokens)
		rows := logits[row+n-(k+1) : row+n]
		row += n
		L := len(q.tokens)
		accepted, matched := 0, 0
		for j := 0; j <= k && !q.done; j++ {
			tok := s.sample(q, rows[j])
			s.commit(q, tok, rows[j])
			accepted++
			if j == k || tok != drafts[i][j] {
				break
			}
			matched++ // draft token j was the target's own choice
		}
		// target KV holds the committed tokens except the newest; the draft KV holds the
		// positions it processed whose tokens were accepted.
		q.kvLen = len(q.tokens) - 1
		q.draftLen = min(L+accepted-1, L+k-1)
		if q.draftLen > len(q.tokens)-1 {
			q.draftLen = len(q.tokens) - 1
		}
		q.verifies++
		q.drafted += k
		q.accepted += matched
		committed += accepted
		s.winAccept[0] += accepted
		s.winAccept[1]++
		s.mu.Lock()
		s.st.SpecAccepted += int64(accepted)
		s.st.SpecVerifies++
		s.st.SpecDraftTokens += int64(k)
		s.st.SpecDraftAccepted += int64(matched)
		if len(s.st.SpecAcceptedPerPos) < k {
			s.st.SpecAcceptedPerPos = append(s.st.SpecAcceptedPerPos, make([]int64, k-len(s.st.SpecAcceptedPerPos))...)
		}
		for j := 0; j < matched; j++ {
			s.st.SpecAcceptedPerPos[j]++
		}
		s.mu.Unlock()
	}
	return committed, nil
}

// sample picks the next token: argmax at temperature 0, else a draw (with top-p) from the
// request's own random stream.
func (s *Scheduler) sample(q *seq, logits []float32) int {
	t := q.req.Temperature
	if q.generated < q.req.MinNew && !q.req.IgnoreEOS {
		// suppress EOS before min_tokens
		l := append([]float32(nil), logits...)
		l[model.EOS] = float32(math.Inf(-1))
		logits = l
	}
	if t <= 0 {
		return argmax(logits)
	}
	mx := float64(logits[argmax(logits)])
	p := make([]float64, len(logits))
	var sum float64
	for i, v := range logits {
		p[i] = math.Exp((float64(v) - mx) / t)
		sum += p[i]
	}
	idx := make([]int, len(p))
	for i := range idx {
		idx[i] = i
	}
	if tp := q.req.TopP; tp > 0 && tp < 1 {
		sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] > p[idx[b]] })
		var c float64
		for n, i := range idx {
			c += p[i] / sum
			if c >= tp {
				idx = idx[:n+1]
				break
			}
		}
		sum = 0
		for _, i := range idx {
			sum += p[i]
		}
	}
	u := q.rng.Float64() * sum
	for _, i := range idx {
		u -= p[i]
		if u < 0 {
			return i
		}
	}
	return idx[len(idx)-1]
}

func argmax(x []float32) int {
	b := 0
	for i, v := range x {
		if v > x[b] {
			b = i
		}
	}
	return b
}

// logprobsOf is the log-softmax of logits at token, with the top-k alternatives.
func logprobsOf(logits []float32, token, topk int) Position {
	mx := float64(logits[argmax(logits)])
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(sum)
	p := Position{Token: token, Logprob: float64(logits[token]) - lse, Rank: 1}
	for _, v := range logits {
		if v > logits[token] {
			p.Rank++
		}
	}
	if topk > 0 {
		idx := make([]int, len(logits))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return logits[idx[a]] > logits[idx[b]] })
		for _, i := range idx[:min(topk, len(idx))] {
			p.Top = append(p.Top, TokenLogprob{Token: i, Logprob: float64(logits[i]) - lse})
		}
	}
	return p
}

// commit appends a generated token, sends it, and finishes the request on EOS, a stop string or
// the length limit.
func (s *Scheduler) commit(q *seq, tok int, logits []float32) {
	q.tokens = append(q.tokens, tok)
	q.generated++
	ev := Event{Token: tok, Generated: true}
	if q.req.Logprobs {
		lp := logprobsOf(logits, tok, q.req.TopLogprobs)
		ev.Pos = &lp
	}
	q.req.out <- ev
	s.mu.Lock()
	s.st.GenerationTokensTotal++
	s.mu.Unlock()
	if tok == model.EOS && !q.req.IgnoreEOS {
		s.complete(q, "stop")
		return
	}
	if b := model.TokenBytes(tok); b > 0 {
		q.text = append(q.text, byte(tok))
		for _, st := range q.req.Stop {
			if st == "" {
				continue
			}
			from := max(0, len(q.text)-len(st)-1)
			if i := strings.Index(string(q.text[from:]), st); i >= 0 {
				s.completeStop(q, "stop", st, from+i)
				return
			}
		}
	}
	if q.generated >= q.req.MaxNew {
		s.complete(q, "length")
	}
}

func (s *Scheduler) complete(q *seq, reason string) { s.completeStop(q, reason, "", -1) }

// completeStop ends a running request: its pages go back to the pool (less what the leak fault
// keeps) and the final event is sent.
func (s *Scheduler) completeStop(q *seq, reason, stop string, at int) {
	if q.done {
		return
	}
	q.done = true
	if s.cfg.LeakBytesPerReq > 0 {
		s.leak(q)
	}
	s.release(q)
	s.send(q, Event{Done: true, FinishReason: reason, MatchedStop: stop, StopAt: at})
}

// leak keeps pages of a finished request out of the pool for good (--fault-leak-mb-per-request):
// first the request's own pages, then free pages that no admitted request has reserved.
func (s *Scheduler) leak(q *seq) {
	perPage := s.cfg.KVBytesPerToken * int64(s.alloc.PageSize())
	want := int((s.cfg.LeakBytesPerReq + perPage - 1) / perPage)
	n := min(want, len(q.pages))
	q.pages = q.pages[:len(q.pages)-n]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaked += n
	if rest := want - n; rest > 0 {
		allocated := 0
		for _, r := range s.running {
			allocated += len(r.pages)
		}
		spare := s.alloc.FreePages() - (s.reserved - allocated)
		if k := min(rest, spare); k > 0 {
			if _, err := s.alloc.Grow(nil, k*s.alloc.PageSize()); err == nil {
				s.leaked += k
			}
		}
	}
}

// finish ends a request that is not (or no longer) holding KV pages, e.g. on abort.
func (s *Scheduler) finish(q *seq, reason string, err error) {
	if q.done {
		return
	}
	q.done = true
	s.send(q, Event{Done: true, FinishReason: reason, Err: err})
}

func (s *Scheduler) send(q *seq, ev Event) {
	ev.PromptTokens = q.promptLen
	ev.CompletionTokens = q.generated
	ev.SpecVerifies = q.verifies
	ev.SpecDraftTokens = q.drafted
	ev.SpecAcceptedDrafts = q.accepted
	q.req.out <- ev
	close(q.req.out)
}
