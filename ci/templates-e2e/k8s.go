package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	corev1 "k8s.io/api/core/v1"
)

// A kubelet for the templates' Jobs, as far as they need one: the manifest applied as its
// header says (RECKON_RUN_ID_VALUE replaced by the run's id), decoded strictly into the
// upstream batch/v1 Job types; every pod of the shard Job (completionMode Indexed: one per
// completion index, JOB_COMPLETION_INDEX set), then the merge Job's pod. A pod runs its init
// containers, then its container: command and args with $(VAR) expanded from the container's
// env, that env (value, or secretKeyRef from local Secret values) over the image's, in the
// image's working directory, inside a mount namespace and chroot whose root is this machine's
// (the image: its tools) with the image's own directories (/src, /trusted) and the pod's
// volumes (a PersistentVolumeClaim: a local directory that outlives pods and nights; an
// emptyDir: a fresh one per pod; readOnly mounts read-only) mounted at their mountPaths.

type k8sCluster struct {
	log     *os.File
	image   map[string]string // image path -> local dir (/src, /trusted)
	imgEnv  map[string]string // the image's ENV
	workdir string            // the image's WORKDIR
	pvcs    map[string]string // claim name -> local dir
	secrets map[string]map[string]string
	dir     string // pods' emptyDirs and roots
	pods    int
}

var k8sVarRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// k8sExpand is the kubelet's $(VAR) expansion in command, args and env values (an unknown
// reference stays as written).
func k8sExpand(s string, env map[string]string) string {
	return k8sVarRef.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := env[k8sVarRef.FindStringSubmatch(m)[1]]; ok {
			return v
		}
		return m
	})
}

// runJob runs every pod of a Job one after another and returns one result per pod.
func (c *k8sCluster) runJob(job batchv1.Job) ([]jobResult, error) {
	n := 1
	if job.Spec.Completions != nil {
		n = int(*job.Spec.Completions)
	}
	indexed := job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion
	var out []jobResult
	for i := 0; i < n; i++ {
		extra := map[string]string{}
		name := job.Name
		if indexed {
			extra["JOB_COMPLETION_INDEX"] = fmt.Sprint(i)
			name = fmt.Sprintf("%s-%d", job.Name, i)
		}
		r, err := c.runPod(name, job.Spec.Template.Spec, extra)
		if err != nil {
			return out, fmt.Errorf("pod %s: %w", name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func (c *k8sCluster) runPod(name string, pod corev1.PodSpec, extra map[string]string) (jobResult, error) {
	c.pods++
	podDir := filepath.Join(c.dir, fmt.Sprintf("pod-%d-%s", c.pods, name))
	vols := map[string]string{}
	for _, v := range pod.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			d, ok := c.pvcs[v.PersistentVolumeClaim.ClaimName]
			if !ok {
				return jobResult{}, fmt.Errorf("volume %s: no PersistentVolumeClaim %s", v.Name, v.PersistentVolumeClaim.ClaimName)
			}
			vols[v.Name] = d
		case v.EmptyDir != nil:
			vols[v.Name] = filepath.Join(podDir, "emptydir", v.Name)
		default:
			return jobResult{}, fmt.Errorf("volume %s: no local equivalent", v.Name)
		}
		if err := os.MkdirAll(vols[v.Name], 0o755); err != nil {
			return jobResult{}, err
		}
	}
	r := jobResult{Name: "k8s pod " + name}
	containers := append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...)
	for ci, ctr := range containers {
		env := map[string]string{"HOSTNAME": name}
		for k, v := range c.imgEnv {
			env[k] = v
		}
		for k, v := range extra {
			env[k] = v
		}
		for _, e := range ctr.Env {
			switch {
			case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
				ref := e.ValueFrom.SecretKeyRef
				v, ok := c.secrets[ref.Name][ref.Key]
				if !ok {
					return r, fmt.Errorf("container %s: env %s: no Secret %s key %s", ctr.Name, e.Name, ref.Name, ref.Key)
				}
				env[e.Name] = v
			case e.ValueFrom != nil:
				return r, fmt.Errorf("container %s: env %s: valueFrom not provided locally", ctr.Name, e.Name)
			default:
				env[e.Name] = k8sExpand(e.Value, env)
			}
		}
		argv := append(append([]string{}, ctr.Command...), ctr.Args...)
		for i := range argv {
			argv[i] = k8sExpand(argv[i], env)
		}
		if len(ctr.Command) == 0 {
			return r, fmt.Errorf("container %s: no command (the image has no entrypoint)", ctr.Name)
		}
		wd := c.workdir
		if ctr.WorkingDir != "" {
			wd = ctr.WorkingDir
		}
		// The container's root: mount namespace, this machine's top-level directories, the
		// image's directories, the volumes at their mountPaths; then chroot, cd, exec.
		root := filepath.Join(podDir, fmt.Sprintf("root-%d", ci))
		var mounts strings.Builder
		for dst, src := range c.image {
			fmt.Fprintf(&mounts, "bindmount %s %s false\n", shellQuote(src), shellQuote(dst))
		}
		for _, m := range ctr.VolumeMounts {
			src, ok := vols[m.Name]
			if !ok {
				return r, fmt.Errorf("container %s: mount of unknown volume %s", ctr.Name, m.Name)
			}
			fmt.Fprintf(&mounts, "bindmount %s %s %v\n", shellQuote(src), shellQuote(m.MountPath), m.ReadOnly)
		}
		var envArgs []string
		for k, v := range env {
			envArgs = append(envArgs, shellQuote(k+"="+v))
		}
		var q []string
		for _, a := range argv {
			q = append(q, shellQuote(a))
		}
		script := fmt.Sprintf(`set -euo pipefail
root=%s
mkdir -p "$root"
for d in /*; do
	n="${d#/}"
	if [ -L "$d" ]; then ln -sfn "$(readlink "$d")" "$root/$n"; continue; fi
	[ -d "$d" ] || continue
	mkdir -p "$root/$n"
	mount --rbind "$d" "$root/$n"
done
bindmount() {
	mkdir -p "$root$2"
	mount --bind "$1" "$root$2"
	if [ "$3" = true ]; then mount -o remount,bind,ro "$root$2"; fi
}
%s
exec env -i %s chroot "$root" /bin/sh -c 'cd "$0" && exec "$@"' %s %s
`, shellQuote(root), mounts.String(), strings.Join(envArgs, " "), shellQuote(wd), strings.Join(q, " "))
		sf := filepath.Join(podDir, fmt.Sprintf("container-%d.sh", ci))
		if err := writeFile(sf, script, false); err != nil {
			return r, err
		}
		fmt.Fprintf(c.log, "=== k8s pod %s container %s: %s\n", name, ctr.Name, strings.Join(argv, " "))
		ns := []string{"--mount", "--propagation", "private"}
		if os.Geteuid() != 0 {
			ns = append([]string{"--user", "--map-root-user"}, ns...) // an unprivileged user namespace
		}
		cmd := exec.Command("unshare", append(ns, "bash", sf)...)
		code, out, err := runLogged(cmd, filepath.Join(podDir, fmt.Sprintf("log-%d.txt", ci)), c.log, 30*time.Minute)
		if err != nil {
			return r, err
		}
		fmt.Fprintf(c.log, "=== k8s pod %s container %s: exit %d\n", name, ctr.Name, code)
		r.Exit, r.Closing = code, lastClosing(out)
		if ci < len(pod.InitContainers) {
			r.Name = fmt.Sprintf("k8s pod %s init container %s", name, ctr.Name)
			if code != 0 {
				return r, nil // an init container failed: the pod fails, its containers never start
			}
			continue
		}
		r.Name = fmt.Sprintf("k8s pod %s", name)
		r.Gate = strings.Contains(strings.Join(argv, " "), "reckon gate ") || strings.Contains(strings.Join(argv, " "), "reckon merge ")
	}
	return r, nil
}

// pinK8s sets RECKON_SHA256 where the manifest pins it (every container's env).
func pinK8s(jobs []batchv1.Job, sum string) {
	for ji := range jobs {
		spec := &jobs[ji].Spec.Template.Spec
		for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for ci := range list {
				for ei := range list[ci].Env {
					if list[ci].Env[ei].Name == "RECKON_SHA256" {
						list[ci].Env[ei].Value = sum
					}
				}
			}
		}
	}
}
