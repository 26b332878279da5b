package core

import (
	"regexp"
	"strings"
)

var (
	arDisabledRE = regexp.MustCompile(`(?i:custom ?all-?reduce(?:V2)?) is disabled (because|due to) (.*)`)
	arSilenceRE  = regexp.MustCompile(`\.?\s*To silence this warning.*$`)
	arFlagRE     = regexp.MustCompile(`disable_custom_all_reduce['"]?\s*[=:]\s*True`)
	arRegisterRE = regexp.MustCompile(`Registering (\d+) cuda graph addresses`)
	arBackendsRE = regexp.MustCompile(`Using \[([^\]]*)\] all-reduce backends(?:.*?for group '([^']*)')?`)
)

// AllReduceTracker decides the effective allreduce backend from log records.
//
// Only lines real engines print count. Evidence that custom allreduce is off (any rank): a
// "Custom allreduce is disabled because/due to ..." warning, also in its "CustomAllReduceV2 is
// disabled ..." spelling (the reason is kept), disable_custom_all_reduce=True in the printed
// arguments, or a vLLM "Using [...] all-reduce backends" list without CUSTOM. Evidence that it
// is on: "Registering N cuda graph addresses" (SGLang v1 and vLLM custom allreduce with CUDA
// graphs) or a backend list with CUSTOM. Off-evidence wins; with no evidence the backend is
// unknown (current SGLang's CustomAllReduceV2 logs nothing either way: the profiler trace, see
// package engine/profile, is the evidence there). No release prints an "allreduce backend: X"
// line, so such a line is not evidence.
type AllReduceTracker struct {
	reason     string
	disabled   bool
	flagOff    bool
	listNoCust string
	custom     bool
}

// Record feeds one record (a Segment's text).
func (t *AllReduceTracker) Record(text string) {
	if !strings.Contains(text, "llreduce") && !strings.Contains(text, "llReduce") && !strings.Contains(text, "ll-reduce") &&
		!strings.Contains(text, "all_reduce") && !strings.Contains(text, "Registering") {
		return
	}
	if m := arDisabledRE.FindStringSubmatch(text); m != nil {
		reason := strings.TrimSpace(arSilenceRE.ReplaceAllString(m[2], ""))
		reason = strings.TrimSuffix(reason, ".")
		if m[1] != "because" && !strings.EqualFold(m[1], "because") {
			reason = m[1] + " " + reason
		}
		if !t.disabled {
			t.reason = reason
		}
		t.disabled = true
		return
	}
	if arFlagRE.MatchString(text) {
		t.flagOff = true
	}
	if arRegisterRE.MatchString(text) {
		t.custom = true
	}
	if m := arBackendsRE.FindStringSubmatch(text); m != nil {
		if m[2] == "" || strings.Contains(m[2], "tp") {
			if strings.Contains(strings.ToUpper(m[1]), "'CUSTOM'") || strings.Contains(strings.ToUpper(m[1]), "\"CUSTOM\"") {
				t.custom = true
			} else if t.listNoCust == "" {
				t.listNoCust = "all-reduce backends [" + m[1] + "] do not include CUSTOM"
			}
		}
	}
}

// Result returns the backend ("custom", "nccl" or "unknown") and the reason custom allreduce
// was not used (nil when unknown or custom).
func (t *AllReduceTracker) Result() (string, *string) {
	switch {
	case t.disabled:
		return AllReduceNCCL, String(t.reason)
	case t.flagOff:
		return AllReduceNCCL, String("disabled by flag (disable_custom_all_reduce=True)")
	case t.listNoCust != "":
		return AllReduceNCCL, String(t.listNoCust)
	case t.custom:
		return AllReduceCustom, nil
	}
	return AllReduceUnknown, nil
}
