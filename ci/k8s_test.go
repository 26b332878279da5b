package ci_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/reckon-ci/reckon/ci/k8sjobs"
	corev1 "k8s.io/api/core/v1"
)

// checkShardJobs: the rules of the Kubernetes template. An Indexed Job runs N shards, each pod
// asks for GPUs and passes --shard from its completion index (0-based, +1) out of the same N,
// under --strict and a --timeout below the Job's deadline; a merge Job joins every shard.
func checkShardJobs(jobs []batchv1.Job) []string {
	var bad []string
	if len(jobs) != 2 {
		return []string{"expected two Jobs (the shards, then the merge)"}
	}
	shards, merge := jobs[0], jobs[1]
	if shards.APIVersion != "batch/v1" || shards.Kind != "Job" || shards.Spec.CompletionMode == nil || *shards.Spec.CompletionMode != batchv1.IndexedCompletion {
		bad = append(bad, "the shard Job is not an Indexed batch/v1 Job")
	}
	n := int32(0)
	if shards.Spec.Completions != nil {
		n = *shards.Spec.Completions
	}
	pod := shards.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		bad = append(bad, "shard pods restart in place (a red gate must not be rerun until green)")
	}
	if len(pod.Containers) != 1 {
		return append(bad, "expected one shard container")
	}
	c := pod.Containers[0]
	cmd := strings.Join(append(append([]string{}, c.Command...), c.Args...), " ")
	if q, ok := c.Resources.Requests[corev1.ResourceName("nvidia.com/gpu")]; !ok || q.IsZero() {
		bad = append(bad, "shard pods request no nvidia.com/gpu")
	}
	want := `--shard "$((JOB_COMPLETION_INDEX + 1))/` + itoa(n) + `"`
	if !strings.Contains(cmd, want) {
		bad = append(bad, "the shard command does not pass "+want+" (completions "+itoa(n)+")")
	}
	if !strictGate.MatchString(cmd) {
		bad = append(bad, "the shard gate runs without --strict")
	}
	bad = append(bad, checkStrictSwitch("shard", cmd, false)...)
	// Every shard judges its checks against history with the store read-only; only the merge
	// Job appends.
	if !strings.Contains(cmd, `--history "$RECKON_HISTORY" --history-readonly`) {
		bad = append(bad, "the shard gate is not given the history store read-only (--history \"$RECKON_HISTORY\" --history-readonly)")
	}
	if d, ok := gateTimeout(cmd); !ok || shards.Spec.ActiveDeadlineSeconds == nil || d.Seconds() >= float64(*shards.Spec.ActiveDeadlineSeconds) {
		bad = append(bad, "the shard gate has no --timeout below the Job's activeDeadlineSeconds (a deadline would kill it before it writes its reports)")
	}
	if !strings.Contains(cmd, "/trusted/") || strings.Contains(cmd, "--spec /src/") {
		bad = append(bad, "spec and baselines do not come from the trusted tree")
	}
	if len(merge.Spec.Template.Spec.Containers) != 1 {
		return append(bad, "expected one merge container")
	}
	mc := merge.Spec.Template.Spec.Containers[0]
	mcmd := strings.Join(append(append([]string{}, mc.Command...), mc.Args...), " ")
	if !strings.Contains(mcmd, "reckon merge") {
		bad = append(bad, "the merge Job does not run reckon merge")
	}
	bad = append(bad, checkStrictSwitch("merge", mcmd, false)...)
	for i := int32(1); i <= n; i++ {
		if !strings.Contains(mcmd, `"$run/shard-`+itoa(i)+`"`) {
			bad = append(bad, "the merge leaves out shard "+itoa(i))
		}
	}
	// One run's shards only: both Jobs carry the same run id, the shards write under it and the
	// merge reads under it (never a previous run's shards left on the volume).
	runID := func(c corev1.Container) string {
		for _, e := range c.Env {
			if e.Name == "RECKON_RUN_ID" {
				return e.Value
			}
		}
		return ""
	}
	if id := runID(c); id == "" || id != runID(mc) {
		bad = append(bad, "the shard and merge Jobs do not share a RECKON_RUN_ID")
	}
	if !strings.Contains(cmd, `--out "/results/$RECKON_RUN_ID/shard-`) || !strings.Contains(mcmd, `run="/results/$RECKON_RUN_ID"`) {
		bad = append(bad, "shards or merge do not use the run's own directory /results/$RECKON_RUN_ID")
	}
	if !strings.Contains(mcmd, "reckon history add \"$run/merged/results.json\"") || !strings.Contains(mcmd, "reckon history report") {
		bad = append(bad, "the merge Job does not append the merged night to the history with its trend page")
	}
	bad = append(bad, checkPodInstall("shard", shards.Spec.Template.Spec, "reckon gate ")...)
	bad = append(bad, checkPodInstall("merge", merge.Spec.Template.Spec, "reckon merge ")...)
	return bad
}

// checkPodInstall: the pod's reckon is the pinned release archive, sha256 verified: an init
// container runs the trusted tree's install-reckon.sh with a release tag and a sha256 into a
// volume that the container mounts read-only and runs reckon from (not a reckon of the image).
func checkPodInstall(which string, pod corev1.PodSpec, verb string) []string {
	var bad []string
	var dir string
	for _, ic := range pod.InitContainers {
		argv := strings.Join(append(append([]string{}, ic.Command...), ic.Args...), " ")
		if !strings.Contains(argv, "install-reckon.sh") {
			continue
		}
		env := map[string]string{}
		for _, e := range ic.Env {
			env[e.Name] = e.Value
		}
		if !strings.HasPrefix(argv, "/trusted/.reckon/install-reckon.sh $(RECKON_VERSION) $(RECKON_SHA256) ") {
			bad = append(bad, which+": the install does not run the trusted tree's install-reckon.sh \"$(RECKON_VERSION)\" \"$(RECKON_SHA256)\" DIR: "+argv)
		}
		if !semverPin.MatchString(env["RECKON_VERSION"]) || !sha256Pin.MatchString(env["RECKON_SHA256"]) {
			bad = append(bad, fmt.Sprintf("%s: RECKON_VERSION %q / RECKON_SHA256 %q are not a release tag and a sha256", which, env["RECKON_VERSION"], env["RECKON_SHA256"]))
		}
		f := strings.Fields(argv)
		dir = f[len(f)-1]
	}
	if dir == "" {
		return append(bad, which+": no init container installs reckon from the release archive (install-reckon.sh)")
	}
	c := pod.Containers[0]
	cmd := strings.Join(append(append([]string{}, c.Command...), c.Args...), " ")
	if !strings.Contains(cmd, dir+"/"+verb) {
		bad = append(bad, fmt.Sprintf("%s: the container does not run the installed %s%s", which, dir+"/", strings.TrimSpace(verb)))
	}
	if regexp.MustCompile(`(^|[\s;&|])reckon `).MatchString(cmd) {
		bad = append(bad, which+": the container runs a reckon from the image's PATH")
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || m.MountPath == dir && m.ReadOnly
	}
	if !mounted {
		bad = append(bad, which+": the installed reckon's volume is not mounted read-only at "+dir)
	}
	return bad
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func TestKubernetesIndexedJob(t *testing.T) {
	raw := readFile(t, "engine/k8s/reckon-shards.yaml")
	jobs, err := k8sjobs.Decode(raw)
	if err != nil {
		t.Fatalf("engine/k8s/reckon-shards.yaml does not decode strictly into batch/v1 Jobs: %v", err)
	}
	if bad := checkShardJobs(jobs); len(bad) > 0 {
		t.Errorf("engine/k8s/reckon-shards.yaml:\n  %s", strings.Join(bad, "\n  "))
	}
	for name, edit := range map[string][2]string{
		"unknown field":         {"  completionMode: Indexed\n", "  completionMode: Indexed\n  completionsMode: Indexed\n"},
		"misplaced field":       {"      restartPolicy: Never\n      # One shard", "      restartPolicy: Never\n      parallelism: 4\n      # One shard"},
		"not indexed":           {"  completionMode: Indexed\n", "  completionMode: NonIndexed\n"},
		"shard count mismatch":  {"  completions: 4\n", "  completions: 5\n"},
		"0-based shard":         {`--shard "$((JOB_COMPLETION_INDEX + 1))/4"`, `--shard "$JOB_COMPLETION_INDEX/4"`},
		"no gpu request":        {"              nvidia.com/gpu: \"8\"\n            limits:", "            limits:"},
		"not strict":            {"$strict $require --timeout", "$require --timeout"},
		"require cleared":       {`"" | 0 | false) strict=--strict require=--require-baseline ;;`, `"" | 0 | false) strict=--strict require="" ;;`},
		"strict always off":     {`"" | 0 | false) strict=--strict ;;`, `"" | 0 | false) strict="" ;;`},
		"shard appends":         {`--history "$RECKON_HISTORY" --history-readonly`, `--history "$RECKON_HISTORY"`},
		"timeout past deadline": {"--timeout 210m", "--timeout 250m"},
		"untrusted spec":        {"--spec /trusted/.reckon/nightly.yaml\n              --baselines", "--spec /src/.reckon/nightly.yaml\n              --baselines"},
		"merge misses a shard":  {`"$run/shard-3" "$run/shard-4"`, `"$run/shard-3"`},
		"merge reads any run":   {`run="/results/$RECKON_RUN_ID"`, `run="/results"`},
		"shards share one dir":  {`--out "/results/$RECKON_RUN_ID/shard-`, `--out "/results/shard-`},
		"no run id in merge":    {"            - name: RECKON_RUN_ID\n              value: RECKON_RUN_ID_VALUE\n            - name: RECKON_BOOTSTRAP\n              value: \"\"\n            - name: RECKON_HISTORY\n              valueFrom", "            - name: RECKON_BOOTSTRAP\n              value: \"\"\n            - name: RECKON_HISTORY\n              valueFrom"},
		"no history":            {`reckon history add "$run/merged/results.json" &&`, `true &&`},
		"reckon of the image":   {"exec /reckon-bin/reckon gate", "exec reckon gate"},
		"merge from the image":  {"              /reckon-bin/reckon merge --spec", "              reckon merge --spec"},
		"untrusted install":     {`command: ["/trusted/.reckon/install-reckon.sh"`, `command: ["/src/.reckon/install-reckon.sh"`},
		"no checksum":           {`              value: "0000000000000000000000000000000000000000000000000000000000000000"`, `              value: ""`},
		"floating version":      {"              value: v0.1.0", "              value: latest"},
		"no install":            {`command: ["/trusted/.reckon/install-reckon.sh", "$(RECKON_VERSION)", "$(RECKON_SHA256)", "/reckon-bin"]`, `command: ["/bin/true"]`},
	} {
		bad := strings.Replace(raw, edit[0], edit[1], 1)
		if bad == raw {
			t.Fatalf("%s: edit did not apply", name)
		}
		jobs, err := k8sjobs.Decode(bad)
		if err == nil && len(checkShardJobs(jobs)) == 0 {
			t.Errorf("%s: neither the strict decoding nor the rules objected", name)
		}
	}
}
