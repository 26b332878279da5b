package reporters

import (
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// TestSentenceIsTheOneLine: Sentence puts the config first (dropping the judge's name prefix),
// adds the policy flag and the explanation's first clause once, and is idempotent; Line keeps
// the fix of a long message whole in every width the reports use.
func TestSentenceIsTheOneLine(t *testing.T) {
	c := gate.Check{Verdict: gate.Verdict{Name: "throughput x", Config: "custom-ar", Outcome: gate.Fail,
		Message: "throughput x: output_throughput -57% vs nccl: regression"}, Explanation: "KV cache -91% (10.42 -> 0.90 GiB); custom AR buffers 3.85 GiB"}
	want := "custom-ar: output_throughput -57% vs nccl: regression (fails under --strict); KV cache -91% (10.42 -> 0.90 GiB)"
	got := Sentence(c, "--strict")
	if got != want {
		t.Fatalf("Sentence = %q, want %q", got, want)
	}
	c.Message = got
	if again := Sentence(c, "--strict"); again != want {
		t.Errorf("Sentence of a sentence = %q", again)
	}
	eq := gate.Check{Verdict: gate.Verdict{Name: "equivalence pr vs main", Config: "pr", Message: "pr vs main: not equivalent"}}
	if got := Sentence(eq, ""); got != "pr vs main: not equivalent" {
		t.Errorf("a message that names its config first: %q", got)
	}
	fix := "launch with SGLANG_ENABLE_SPEC_V2=0 or a release that fixed it"
	c.Message = "eagle3: spec_accept_length 1.00 < minimum 2.50: " + strings.Repeat("engine detail ", 40) + "(sgl-project/sglang#14046); " + fix
	c.Explanation = ""
	for _, width := range []int{junitMessageRunes, mdVerdictLen, mdCellRunes, 1000, 2 * termLineRunes} {
		if l := Line(&c, width); !strings.HasSuffix(l, fix) || strings.Contains(l, "\n") {
			t.Errorf("width %d: %q cuts the fix", width, l)
		}
	}
}
