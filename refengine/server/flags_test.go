package server

import (
	"io"
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"192MiB": 192 << 20, "2GiB": 2 << 30, "512MB": 512e6, "1G": 1 << 30, "4096": 4096, " 1.5 GiB": 3 << 29} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "-1GiB", "0"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q): want an error", bad)
		}
	}
}

func TestFlagErrors(t *testing.T) {
	cases := map[string][]string{
		"--tp-size 3":              {"--tp-size", "3"},
		"--dtype":                  {"--dtype", "fp8"},
		"--topology":               {"--topology", "infiniband"},
		"--device-memory":          {"--device-memory", "lots"},
		"--mem-fraction-static":    {"--mem-fraction-static", "1.5"},
		"--speculative-algorithm":  {"--speculative-algorithm", "MEDUSA"},
		"--speculative-eagle-topk": {"--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "4"},
		"--fault-slowdown":         {"--fault-slowdown", "0.5"},
		"bogus":                    {"--bogus"},
		"unexpected argument":      {"extra"},
	}
	for want, args := range cases {
		_, err := ParseFlags(args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: got %v, want an error mentioning %q", args, err, want)
		}
	}
	o, err := ParseFlags([]string{"--tp-size", "8", "--trust-remote-code", "--attention-backend", "fa3", "--speculative-algorithm", "eagle"}, io.Discard)
	if err != nil || o.TPSize != 8 || o.DeviceMemory != 192<<20 || o.Host != "127.0.0.1" {
		t.Errorf("good flags: %+v, %v", o, err)
	}
}

func TestInterconnectOverrides(t *testing.T) {
	ts := start(t, nil, false, "--tp-size", "8", "--topology", "pcie", "--interconnect-transfer-us", "40", "--interconnect-bus-gbps", "1")
	m := ts.e.Interconnect
	if m.TransferUs != 40 || m.BusGBps != 1 || m.LatencyUs != 25 {
		t.Errorf("model %+v: overrides not applied (or defaults lost)", m)
	}
	if d, _ := ts.e.ServerInfo()["refengine"].(map[string]any)["interconnect"].(string); !strings.Contains(d, "transfer=40us") || strings.Contains(ts.log.String(), "transfer=40us") {
		t.Errorf("the refengine object's interconnect %q does not show the override (or the log carries it)", d)
	}
	if _, err := ParseFlags([]string{"--interconnect-latency-us", "-1"}, io.Discard); err == nil {
		t.Error("negative override accepted")
	}
}
