package core

import "testing"

func TestParseVersionAndAtLeast(t *testing.T) {
	cases := []struct {
		in              string
		maj, min, patch int
		newest          bool
		atLeast0_11     bool
		atLeast0_5_15   bool
	}{
		{"", 0, 0, 0, true, true, true},
		{"latest", 0, 0, 0, true, true, true},
		{"0.0.0.dev1+g5dd2c243e", 0, 0, 0, true, true, true},
		{"0.0.0.dev0", 0, 0, 0, true, true, true},
		{"0.12.0", 0, 12, 0, false, true, true},
		{"0.12", 0, 12, 0, false, true, true},
		{"v0.10.2", 0, 10, 2, false, false, true},
		{"0.10.2rc2.dev47+g1234abc", 0, 10, 2, false, false, true},
		{"0.11.0rc1", 0, 11, 0, false, true, true},
		{"0.5.3.post1", 0, 5, 3, false, false, false},
		{"0.5.15", 0, 5, 15, false, false, true},
		{"0.22.1+cu128", 0, 22, 1, false, true, true},
		{"1.0.0", 1, 0, 0, false, true, true},
		{"0.4.10", 0, 4, 10, false, false, false},
	}
	for _, c := range cases {
		v, err := ParseVersion(c.in)
		if err != nil {
			t.Errorf("ParseVersion(%q): %v", c.in, err)
			continue
		}
		if v.Major != c.maj || v.Minor != c.min || v.Patch != c.patch || v.Newest != c.newest {
			t.Errorf("ParseVersion(%q) = %+v", c.in, v)
		}
		if got := v.AtLeast(0, 11, 0); got != c.atLeast0_11 {
			t.Errorf("%q AtLeast(0.11.0) = %v", c.in, got)
		}
		if got := v.AtLeast(0, 5, 15); got != c.atLeast0_5_15 {
			t.Errorf("%q AtLeast(0.5.15) = %v", c.in, got)
		}
	}
	for _, bad := range []string{"abc", "12", "0.12.x", "0.12.0 junk"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q): no error", bad)
		}
	}
}

func TestLastVersionToken(t *testing.T) {
	cases := map[string]string{
		"0.12.0\n": "0.12.0",
		"INFO 06-14 04:58:29 [__init__.py:216] Automatically detected platform cuda.\n0.22.1\n": "0.22.1",
		"0.0.0.dev1+g5dd2c243e": "0.0.0.dev1+g5dd2c243e",
		"/usr/lib/python3/warnings.py:12: UserWarning\n0.5.3.post1\n": "0.5.3.post1",
		"listening on 127.0.0.1:8000":                                 "",
		"refengine sglang version 0.4.10.":                            "0.4.10",
		"0.10.2rc2.dev47+g1234abc+junk":                               "",
		"versions 0.1.0 0.2.0":                                        "0.2.0",
		"no version here":                                             "",
		"v0.12.0\r\n":                                                 "0.12.0",
	}
	for in, want := range cases {
		if got := LastVersionToken(in); got != want {
			t.Errorf("LastVersionToken(%q) = %q, want %q", in, got, want)
		}
	}
}
