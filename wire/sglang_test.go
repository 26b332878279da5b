package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestGenerateMetaSpecFields(t *testing.T) {
	var with GenerateResponse
	if err := json.Unmarshal([]byte(`{"text":"x","meta_info":{"id":"a","prompt_tokens":3,"completion_tokens":8,
		"spec_verify_ct":0,"spec_accept_length":2.5,"spec_accept_token_num":12.0,"spec_draft_token_num":18,"cached_tokens":0,"weight_version":"default"}}`), &with); err != nil {
		t.Fatal(err)
	}
	m := with.MetaInfo
	if !m.SpecVerifyReported || m.SpecVerifyCount != 0 || m.CompletionTokens != 8 || m.ID != "a" {
		t.Errorf("meta %+v", m)
	}
	if m.SpecAcceptLength == nil || *m.SpecAcceptLength != 2.5 || m.SpecAcceptTokenNum == nil || *m.SpecAcceptTokenNum != 12 || m.SpecDraftTokenNum == nil || *m.SpecDraftTokenNum != 18 {
		t.Errorf("spec fields %+v", m)
	}
	var without GenerateMeta
	if err := json.Unmarshal([]byte(`{"id":"b","completion_tokens":2,"output_token_logprobs":[[-0.5,3,null]]}`), &without); err != nil {
		t.Fatal(err)
	}
	if without.SpecVerifyReported || without.SpecAcceptTokenNum != nil || len(without.OutputTokenLogprobs) != 1 {
		t.Errorf("meta without spec fields %+v", without)
	}
	var bad GenerateMeta
	if err := json.Unmarshal([]byte(`{"spec_verify_ct":1.5}`), &bad); err == nil || !strings.Contains(err.Error(), "spec_verify_ct") {
		t.Errorf("a fractional count was accepted: %v", err)
	}
	// The refengine writes the field with omitempty; a round trip keeps a nonzero count.
	data, _ := json.Marshal(GenerateMeta{SpecVerifyCount: 4})
	var back GenerateMeta
	if err := json.Unmarshal(data, &back); err != nil || !back.SpecVerifyReported || back.SpecVerifyCount != 4 {
		t.Errorf("round trip %s -> %+v (%v)", data, back, err)
	}
}

func TestProbeSpeculativeRan(t *testing.T) {
	n := func(v int) *int { return &v }
	for _, tc := range []struct {
		name string
		s    *ProbeSpeculative
		ran  bool
		want string
	}{
		{"nil", nil, false, "no evidence"},
		{"none", &ProbeSpeculative{Source: SpecSourceNone, MetricsNote: "GET /metrics: HTTP 404"}, false, "HTTP 404"},
		{"sglang accepted", &ProbeSpeculative{Source: SpecSourceSGLang, Requests: 1, VerifyRequests: 1, VerifySteps: 3, VerifiedTokens: 4, AcceptedTokens: n(1)}, true, "accepted 1 draft tokens"},
		// 1 prefill token + 3 verify steps of one token each: nothing accepted.
		{"sglang one per step", &ProbeSpeculative{Source: SpecSourceSGLang, Requests: 1, VerifyRequests: 1, VerifySteps: 3, VerifiedTokens: 4}, false, "no more than one token per step"},
		{"sglang two per step", &ProbeSpeculative{Source: SpecSourceSGLang, Requests: 1, VerifyRequests: 1, VerifySteps: 3, VerifiedTokens: 7}, true, "more than one token per step"},
		{"vllm moved", &ProbeSpeculative{Source: SpecSourceVLLM, Metrics: &SpecMetricsDelta{Drafts: 3}}, true, "3 drafts"},
		{"vllm still", &ProbeSpeculative{Source: SpecSourceVLLM, Metrics: &SpecMetricsDelta{}}, false, "did not rise"},
	} {
		ran, why := tc.s.Ran()
		if ran != tc.ran || !strings.Contains(why, tc.want) {
			t.Errorf("%s: Ran() = %v %q, want %v with %q", tc.name, ran, why, tc.ran, tc.want)
		}
	}
}
