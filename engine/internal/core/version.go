package core

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Version is an engine release as the adapters compare it: major.minor.patch, and whether it
// stands for the newest code (an empty version, or a main-branch build "0.0.0.devN+g<sha>",
// which is what SGLang built from a git checkout reports).
//
// Pre-release and post-release suffixes (rc1, .dev47+g..., .post1, +cu128) are kept in Raw
// but do not order versions: a release candidate or nightly of X.Y.Z carries X.Y.Z's flags,
// which is all the adapters ask of a version.
type Version struct {
	// Raw is the version as given, trimmed ("" for the newest).
	Raw string
	// Major, Minor and Patch are the release numbers (0 for the newest).
	Major, Minor, Patch int
	// Newest is true for "" and for main-branch builds 0.0.0.devN: newer than every release.
	Newest bool
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)(?:\.(\d+))?((?:[.\-_]?(?:dev|post|rc|a|b|alpha|beta)\d*)*)(?:\+[0-9A-Za-z][0-9A-Za-z.\-_]*)?$`)

// ParseVersion parses an engine version: "" (the newest), "0.12", "0.12.0", "v0.5.3",
// "0.5.3.post1", "0.10.2rc2.dev47+g1234abc", "0.22.1+cu128", "0.0.0.dev1+g5dd2c243e" (a
// main-branch build: the newest). Anything else is an error naming what was expected.
func ParseVersion(s string) (Version, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "latest") {
		return Version{Raw: s, Newest: true}, nil
	}
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return Version{}, fmt.Errorf("engine version %q: expected MAJOR.MINOR[.PATCH] with optional rc/dev/post/+local suffixes, e.g. 0.12.0, 0.5.3.post1 or 0.0.0.dev1+g5dd2c243e", s)
	}
	v := Version{Raw: s}
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	if m[3] != "" {
		v.Patch, _ = strconv.Atoi(m[3])
	}
	if v.Major == 0 && v.Minor == 0 && v.Patch == 0 && strings.Contains(strings.ToLower(m[4]), "dev") {
		v.Newest = true
	}
	return v, nil
}

// AtLeast reports whether v is release major.minor.patch or later (the newest always is).
func (v Version) AtLeast(major, minor, patch int) bool {
	if v.Newest {
		return true
	}
	if v.Major != major {
		return v.Major > major
	}
	if v.Minor != minor {
		return v.Minor > minor
	}
	return v.Patch >= patch
}

// String returns the version as given, or "newest" for the empty version.
func (v Version) String() string {
	if v.Raw == "" {
		return "newest"
	}
	return v.Raw
}

// versionTokenRE finds version-looking tokens in free text: 2 or 3 numeric components and
// optional suffixes. LastVersionToken drops those that are part of a longer dotted token (an
// IP address, a file name).
var versionTokenRE = regexp.MustCompile(`v?(\d+\.\d+(?:\.\d+)?(?:[.\-_]?(?:dev|post|rc|a|b)\d*)*(?:\+[0-9A-Za-z][0-9A-Za-z_]*(?:\.[0-9A-Za-z_]+)*)?)`)

func tokenChar(c byte) bool {
	return c == '.' || c == '+' || c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// LastVersionToken returns the last version-looking token of out ("" when there is none):
// what `vllm --version` or `python3 -c "import sglang; print(sglang.__version__)"` printed
// after whatever warnings came first. A token must stand alone: "127.0.0.1" and "file.1.2.py"
// are not versions; a sentence's final period is allowed.
func LastVersionToken(out string) string {
	lines := strings.Split(strings.ReplaceAll(out, "\r", "\n"), "\n")
	for k := len(lines) - 1; k >= 0; k-- {
		line := lines[k]
		last := ""
		for _, m := range versionTokenRE.FindAllStringSubmatchIndex(line, -1) {
			start, end := m[0], m[1]
			if start > 0 && tokenChar(line[start-1]) {
				continue
			}
			if end < len(line) && tokenChar(line[end]) {
				// "0.12.0." at the end of a sentence is fine.
				if !(line[end] == '.' && (end+1 == len(line) || line[end+1] == ' ' || line[end+1] == '\t')) {
					continue
				}
			}
			last = line[m[2]:m[3]]
		}
		if last != "" {
			return last
		}
	}
	return ""
}
