package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/testbed"
)

func init() { rootCmd.AddCommand(newDoctorCmd()) }

// doctorTool is one tool doctor looked for.
type doctorTool struct {
	Name    string `json:"name"`
	Found   bool   `json:"found"`
	Path    string `json:"path,omitempty"`
	Version string `json:"version,omitempty"`
	Note    string `json:"note,omitempty"`
}

// doctorReport is the JSON output of `reckon doctor --json`.
type doctorReport struct {
	// ID is the testbed key reckon gate uses for this machine and the engine given (--spec or
	// --engine); without one, "" (the engine is part of the key) and Keys has one per engine.
	ID string `json:"id"`
	// Keys is the testbed key per engine kind, the folder under baselines/ a gate run of a spec of
	// that engine uses on this machine.
	Keys    map[string]string    `json:"keys"`
	Testbed *testbed.Fingerprint `json:"testbed"`
	Tools   []doctorTool         `json:"tools"`
}

func newDoctorCmd() *cobra.Command {
	var (
		asJSON        bool
		engine        string
		engineVersion string
		specPath      string
		timeout       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Print this machine's testbed fingerprint and the tools reckon can use",
		Long: `doctor prints the testbed fingerprint that names this machine's baseline folder
(baselines/<slug>-<hash>/): GPU model, count and memory, driver and CUDA versions, how the GPUs
are linked (nvidia-smi topo -m), MIG state, or the CPU when there is no GPU. It also says which
tools were found: nvidia-smi, python3 and the Python engines (sglang, vllm, torch), vllm's CLI.

The engine is part of the fingerprint: give it with --engine, or --spec to take it from a spec.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if specPath != "" {
				s, err := spec.Load(specPath)
				if err != nil {
					return withExitCode(2, err)
				}
				if engine == "" {
					engine = s.Engine.Kind
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			fp, err := testbed.DetectWith(ctx, testbed.Options{Engine: engine, EngineVersion: engineVersion})
			if err != nil {
				return withExitCode(3, err)
			}
			rep := doctorReport{Keys: gateKeys(fp), Testbed: fp, Tools: findTools(ctx)}
			if fp.Engine != "" {
				rep.ID = fp.Key() // the key reckon gate computes: the fingerprint with the spec's engine
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return printDoctor(cmd.OutOrStdout(), rep)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the fingerprint and tools as JSON")
	cmd.Flags().StringVar(&engine, "engine", "", "engine name recorded in the fingerprint (sglang, vllm, refengine)")
	cmd.Flags().StringVar(&engineVersion, "engine-version", "", "engine version recorded (not hashed)")
	cmd.Flags().StringVar(&specPath, "spec", "", "take the engine from this spec's engine.kind")
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "bound on the whole detection")
	return cmd
}

// findTools looks for the programs and Python packages reckon can drive. Python packages are
// found with importlib (find_spec and metadata), which does not import them.
func findTools(ctx context.Context) []doctorTool {
	var tools []doctorTool
	for _, name := range []string{"nvidia-smi", "python3", "vllm"} {
		t := doctorTool{Name: name}
		if p, err := exec.LookPath(name); err == nil {
			t.Found, t.Path = true, p
		}
		tools = append(tools, t)
	}
	pkgs := []string{"sglang", "vllm", "torch"}
	py := tools[1]
	if !py.Found {
		for _, p := range pkgs {
			tools = append(tools, doctorTool{Name: "python:" + p, Note: "no python3"})
		}
		return tools
	}
	const probe = `import importlib.util as u, importlib.metadata as m
for n in ("sglang", "vllm", "torch"):
    try:
        s = u.find_spec(n)
    except Exception:
        s = None
    v = ""
    if s is not None:
        try:
            v = m.version(n)
        except Exception:
            pass
    print(n, "yes" if s is not None else "no", v or "-")
`
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(c, py.Path, "-c", probe).Output()
	found := map[string][2]string{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 {
			found[f[0]] = [2]string{f[1], f[2]}
		}
	}
	for _, p := range pkgs {
		t := doctorTool{Name: "python:" + p}
		r, ok := found[p]
		switch {
		case !ok && err != nil:
			t.Note = fmt.Sprintf("python3 failed: %v", err)
		case ok && r[0] == "yes":
			t.Found = true
			if r[1] != "-" {
				t.Version = r[1]
			}
		}
		tools = append(tools, t)
	}
	return tools
}

// gateKeys is the testbed key reckon gate would use on this machine for each engine kind: the
// engine is part of the key (suites: testbed.Detect, then the spec's engine.kind).
func gateKeys(fp *testbed.Fingerprint) map[string]string {
	keys := map[string]string{}
	for _, kind := range []string{spec.EngineSGLang, spec.EngineVLLM} {
		c := *fp
		c.Engine, c.EngineVersion = kind, ""
		keys[kind] = c.Key()
	}
	if fp.Engine != "" {
		keys[fp.Engine] = fp.Key()
	}
	return keys
}

func printDoctor(w io.Writer, rep doctorReport) error {
	fp := rep.Testbed
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if rep.ID != "" {
		fmt.Fprintf(tw, "testbed\t%s (the key reckon gate uses for %s specs here)\n", rep.ID, fp.Engine)
		fmt.Fprintf(tw, "summary\t%s\n", fp.Summary())
		fmt.Fprintf(tw, "baselines\tbaselines/%s/<spec>.json\n", rep.ID)
		v := fp.EngineVersion
		if v == "" {
			v = "version not given"
		}
		fmt.Fprintf(tw, "engine\t%s (%s)\n", fp.Engine, v)
	} else {
		// The engine kind is part of the key: one per kind, as reckon gate computes them.
		for _, kind := range []string{spec.EngineSGLang, spec.EngineVLLM} {
			fmt.Fprintf(tw, "testbed\t%s (reckon gate's key for %s specs here; --spec FILE picks one)\n", rep.Keys[kind], kind)
		}
		fmt.Fprintf(tw, "summary\t%s\n", fp.Summary())
		fmt.Fprintf(tw, "baselines\tbaselines/<testbed>/<spec>.json\n")
	}
	fmt.Fprintf(tw, "cpu\t%s, %d CPUs available\n", fp.CPU.Model, fp.CPU.Logical)
	for _, g := range fp.GPUs {
		fmt.Fprintf(tw, "gpu %d\t%s, %d MiB, bus %s, cc %s, mig %s\n", g.Index, g.Name, g.MemoryMiB, orDash(g.BusID), orDash(g.ComputeCap), orDash(g.MIG))
	}
	for _, n := range fp.Notes {
		fmt.Fprintf(tw, "note\t%s\n", n)
	}
	for _, t := range rep.Tools {
		state := "not found"
		if t.Found {
			state = "found"
			if t.Path != "" {
				state += " " + t.Path
			}
			if t.Version != "" {
				state += " " + t.Version
			}
		}
		if t.Note != "" {
			state += " (" + t.Note + ")"
		}
		fmt.Fprintf(tw, "tool\t%s: %s\n", t.Name, state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if fp.Topology != nil {
		fmt.Fprintln(w, "\ntopology (nvidia-smi topo -m):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "\t%s\n", strings.Join(fp.Topology.Devices, "\t"))
		for i, d := range fp.Topology.Devices {
			fmt.Fprintf(tw, "%s\t%s\n", d, strings.Join(fp.Topology.Links[i], "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
