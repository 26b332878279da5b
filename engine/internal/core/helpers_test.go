package core

import "regexp"

func mustPrefix() *regexp.Regexp {
	return regexp.MustCompile(`\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (TP\d+)\]`)
}
