package main

import "github.com/spf13/pflag"

// baselinesFlag defines --baselines DIR, the directory of stored baselines (one folder per
// testbed), with the one name every command uses (gate, merge, baseline record/diff/show). The
// old name of the baseline commands, --dir, is kept as an alias that warns.
func baselinesFlag(fs *pflag.FlagSet, dir *string) {
	fs.StringVar(dir, "baselines", "baselines", "directory of stored baselines (one folder per testbed)")
	fs.StringVar(dir, "dir", "baselines", "deprecated alias of --baselines")
	_ = fs.MarkDeprecated("dir", "use --baselines (the same flag as reckon gate and reckon merge)")
}
