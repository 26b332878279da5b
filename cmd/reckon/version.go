package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// commit and date are set at build time by the release (.goreleaser.yaml):
// -X main.version={{.Version}} -X main.commit={{.Commit}} -X main.date={{.Date}}. A binary
// built another way falls back to the VCS stamp Go records (go build in a git checkout) or to
// the module version (go install ...@vX.Y.Z).
var (
	commit = ""
	date   = ""
)

func init() { rootCmd.AddCommand(newVersionCmd()) }

// buildVersion returns the version, the commit and the build date of this binary.
func buildVersion() (v, c, d string) {
	v, c, d = version, commit, date
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v, c, d
	}
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && c == "":
			c = s.Value
		case s.Key == "vcs.time" && d == "":
			d = s.Value
		}
	}
	return v, c, d
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print reckon's version (the release tag), commit and build date",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, c, d := buildVersion()
			if c == "" {
				c = "unknown"
			}
			if d == "" {
				d = "unknown"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "reckon %s (commit %s, built %s, %s %s/%s)\n", v, c, d, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
