package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Metrics fetches GET /metrics, the Prometheus text exposition (vLLM always serves it, SGLang
// only with --enable-metrics). Like the other metadata requests it is bounded by
// Options.MetadataTimeout and a 16 MiB body cap; a non-2xx answer is an *APIError.
func (c *Client) Metrics(parent context.Context) ([]byte, error) {
	const endpoint = "GET /metrics"
	ctx, cancel := c.withTimeout(parent)
	defer cancel()
	ctx, mcancel := context.WithTimeout(ctx, c.opts.MetadataTimeout)
	defer mcancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", endpoint, err)
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := c.http.Do(req)
	if err != nil {
		if parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: no complete answer within the metadata timeout of %s: %w", endpoint, c.opts.MetadataTimeout, err)
		}
		return nil, fmt.Errorf("%s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	data, release, err := readBody(endpoint, resp.Body, min(c.opts.MaxBodyBytes, metadataMaxBody))
	defer release()
	if err != nil {
		var le *LimitError
		if errors.As(err, &le) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: reading body: %w", endpoint, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, apiError(endpoint, resp.StatusCode, data)
	}
	return data, nil
}

// SumSamples sums, for each of names, every sample of that metric in a Prometheus text
// exposition, over all its label sets (e.g. vLLM's per-engine series of
// vllm:spec_decode_num_drafts_total). A name with no sample is absent from the map; comment
// lines and unparsable values are skipped.
func SumSamples(text []byte, names ...string) map[string]float64 {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ \t")
		if end <= 0 || !want[line[:end]] {
			continue
		}
		name, rest := line[:end], line[end:]
		if rest[0] == '{' {
			j := labelsEnd(rest)
			if j < 0 {
				continue
			}
			rest = rest[j+1:]
		}
		fields := strings.Fields(rest) // value [timestamp]
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[name] += v
	}
	return out
}

// labelsEnd is the index of the "}" closing the label set that s starts with, skipping quoted
// label values (which may contain "}" and escaped quotes); -1 when there is none.
func labelsEnd(s string) int {
	quoted := false
	for i := 1; i < len(s); i++ {
		switch {
		case quoted && s[i] == '\\':
			i++
		case s[i] == '"':
			quoted = !quoted
		case !quoted && s[i] == '}':
			return i
		}
	}
	return -1
}
