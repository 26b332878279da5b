package collective

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const torchScript = "../../ci/probes/torch_allreduce_probe.py"

// TestTorchProbeScriptArguments runs the GPU probe's --dry-run (no torch needed) to check its
// argument handling agrees with this package: the same size syntax, dtypes and input kinds, and
// exit status 2 with a clear message on bad input.
func TestTorchProbeScriptArguments(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the torch probe script's argument handling is not checked here")
	}
	out, err := exec.Command(py, torchScript, "--dry-run", "--nproc", "8", "--sizes", "1KiB,64KiB,1MiB,4096").Output()
	if err != nil {
		t.Fatalf("dry run failed: %v", err)
	}
	var plan struct {
		WorldSize  int      `json:"world_size"`
		Sizes      []int64  `json:"sizes"`
		Algorithms []string `json:"algorithms"`
		Reference  string   `json:"reference"`
		Env        map[string]string
	}
	if err := json.Unmarshal(out, &plan); err != nil {
		t.Fatalf("dry run printed no JSON plan: %v\n%s", err, out)
	}
	want, _ := ParseSizes("1KiB,64KiB,1MiB,4096")
	if plan.WorldSize != 8 || len(plan.Sizes) != len(want) || plan.Reference != "nccl" || plan.Algorithms[0] != "nccl" {
		t.Fatalf("plan = %+v", plan)
	}
	for i := range want {
		if plan.Sizes[i] != want[i] {
			t.Fatalf("script parses sizes as %v, Go as %v", plan.Sizes, want)
		}
	}
	for _, k := range []string{"NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"} {
		if _, ok := plan.Env[k]; !ok {
			t.Errorf("plan does not report %s", k)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dry-run", "--sizes", "3", "--dtype", "bfloat16"}, "not a multiple"},
		{[]string{"--dry-run", "--sizes", "1XB"}, "unknown unit"},
		{[]string{"--dry-run", "--inputs", "ones"}, "--inputs"},
		{[]string{"--sizes", "1KiB"}, "--out FILE is required"},
		{[]string{"--dry-run", "--nproc", "1"}, "--nproc"},
	} {
		cmd := exec.Command(py, append([]string{torchScript}, tc.args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: err %v, stderr %q; want exit 2 mentioning %q", tc.args, err, stderr.String(), tc.want)
		}
	}
}
