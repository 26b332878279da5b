package ci_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// The release configuration (.goreleaser.yaml) checked without goreleaser (not available
// offline): linux/amd64 and linux/arm64 binaries of cmd/reckon, static, stamped with the tag,
// commit and date that `reckon version` prints; archives named as install-reckon.sh downloads
// them; sha256 checksums; a changelog. The release workflow runs it on tags, with pinned actions.

type goreleaserConfig struct {
	Version int `yaml:"version"`
	Builds  []struct {
		Main    string   `yaml:"main"`
		Binary  string   `yaml:"binary"`
		Env     []string `yaml:"env"`
		Goos    []string `yaml:"goos"`
		Goarch  []string `yaml:"goarch"`
		Flags   []string `yaml:"flags"`
		Ldflags []string `yaml:"ldflags"`
	} `yaml:"builds"`
	Archives []struct {
		Formats      []string `yaml:"formats"`
		NameTemplate string   `yaml:"name_template"`
	} `yaml:"archives"`
	Checksum struct {
		NameTemplate string `yaml:"name_template"`
		Algorithm    string `yaml:"algorithm"`
	} `yaml:"checksum"`
	Changelog struct {
		Use string `yaml:"use"`
	} `yaml:"changelog"`
}

func checkGoreleaser(raw string) []string {
	var c goreleaserConfig
	if err := yaml.Unmarshal([]byte(raw), &c); err != nil {
		return []string{err.Error()}
	}
	var bad []string
	if c.Version != 2 {
		bad = append(bad, fmt.Sprintf("version %d (goreleaser v2 configuration expected)", c.Version))
	}
	if len(c.Builds) != 1 {
		return append(bad, fmt.Sprintf("%d builds, want the one of cmd/reckon", len(c.Builds)))
	}
	b := c.Builds[0]
	if b.Main != "./cmd/reckon" || b.Binary != "reckon" {
		bad = append(bad, fmt.Sprintf("build main %q binary %q", b.Main, b.Binary))
	}
	if !slices.Equal(b.Goos, []string{"linux"}) || !slices.Contains(b.Goarch, "amd64") || !slices.Contains(b.Goarch, "arm64") {
		bad = append(bad, fmt.Sprintf("platforms %v/%v: linux/amd64 and linux/arm64 expected", b.Goos, b.Goarch))
	}
	if !slices.Contains(b.Env, "CGO_ENABLED=0") || !slices.Contains(b.Flags, "-trimpath") {
		bad = append(bad, "not a static, reproducible build (CGO_ENABLED=0, -trimpath)")
	}
	ld := strings.Join(b.Ldflags, " ")
	for _, v := range []string{"-X main.version={{.Tag}}", "-X main.commit={{.FullCommit}}", "-X main.date="} {
		if !strings.Contains(ld, v) {
			bad = append(bad, "ldflags lack "+v+" (reckon version prints the tag and commit)")
		}
	}
	if len(c.Archives) != 1 || !slices.Equal(c.Archives[0].Formats, []string{"tar.gz"}) ||
		c.Archives[0].NameTemplate != "{{ .ProjectName }}_{{ .Version }}_{{ .Os }}_{{ .Arch }}" {
		bad = append(bad, "archives are not reckon_<version>_linux_<arch>.tar.gz (the name install-reckon.sh downloads)")
	}
	if c.Checksum.NameTemplate != "checksums.txt" || c.Checksum.Algorithm != "sha256" {
		bad = append(bad, "no sha256 checksums.txt (the templates pin a sha256 from it)")
	}
	if c.Changelog.Use == "" {
		bad = append(bad, "no changelog")
	}
	return bad
}

func TestGoreleaserConfig(t *testing.T) {
	raw := readFile(t, "../.goreleaser.yaml")
	mutate(t, ".goreleaser.yaml", raw, map[string][2]string{
		"no arm64":       {"goarch: [amd64, arm64]", "goarch: [amd64]"},
		"cgo":            {"      - CGO_ENABLED=0\n", "      - CGO_ENABLED=1\n"},
		"no commit":      {" -X main.commit={{.FullCommit}}", ""},
		"renamed":        {`name_template: "{{ .ProjectName }}_{{ .Version }}_{{ .Os }}_{{ .Arch }}"`, `name_template: "{{ .ProjectName }}-{{ .Os }}-{{ .Arch }}"`},
		"md5 checksums":  {"algorithm: sha256", "algorithm: md5"},
		"no changelog":   {"changelog:\n  use: git\n", "changelog:\n  use: \"\"\n"},
		"v1 config":      {"version: 2\n", "version: 1\n"},
		"wrong main pkg": {"main: ./cmd/reckon", "main: ./cmd/refengine"},
	}, checkGoreleaser)
	// The variables the ldflags set exist in package main of cmd/reckon.
	src := readFile(t, "../cmd/reckon/version.go") + readFile(t, "../cmd/reckon/main.go")
	for _, v := range []string{"var version = ", "commit = ", "date   = "} {
		if !strings.Contains(src, v) {
			t.Errorf("cmd/reckon lacks %q, which .goreleaser.yaml's ldflags set", v)
		}
	}
	// install-reckon.sh downloads exactly that name.
	if s := readFile(t, "scripts/install-reckon.sh"); !strings.Contains(s, `archive="reckon_${version#v}_linux_${arch}.tar.gz"`) {
		t.Error("install-reckon.sh does not download reckon_<version>_linux_<arch>.tar.gz")
	}
}

func checkReleaseWorkflow(raw string) []string {
	var wf engineWorkflow
	if err := yaml.Unmarshal([]byte(raw), &wf); err != nil {
		return []string{err.Error()}
	}
	var bad []string
	push, _ := wf.On["push"].(map[string]any)
	if tags := fmt.Sprint(push["tags"]); !strings.Contains(tags, "v*.*.*") {
		bad = append(bad, "not run on release tags v*.*.*")
	}
	bad = append(bad, checkActionPins(raw)...)
	var gr bool
	for _, j := range wf.Jobs {
		for _, s := range j.Steps {
			if strings.HasPrefix(s.Uses, "goreleaser/goreleaser-action@") && strings.Contains(fmt.Sprint(s.With["args"]), "release --clean") {
				gr = true
			}
		}
	}
	if !gr {
		bad = append(bad, "no goreleaser release step")
	}
	return bad
}

func TestReleaseWorkflow(t *testing.T) {
	raw := readFile(t, "../.github/workflows/release.yml")
	if errs := lint(t, "release.yml", []byte(raw)); len(errs) > 0 {
		for _, e := range errs {
			t.Errorf("release.yml:%d:%d: %s", e.Line, e.Column, e.Message)
		}
	}
	mutate(t, "release.yml", raw, map[string][2]string{
		"any tag":       {`tags: ["v*.*.*"]`, `branches: [main]`},
		"action by tag": {"goreleaser/goreleaser-action@9c156ee8a17a598857849441385a2041ef570552 # v6.3.0", "goreleaser/goreleaser-action@v6"},
		"no goreleaser": {"'release --clean' || ", "'build' || "},
	}, checkReleaseWorkflow)
	if _, err := os.Stat("../.goreleaser.yaml"); err != nil {
		t.Fatal(err)
	}
}
