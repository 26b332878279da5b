package collective

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/wire"
)

// TestContractWrappersAreWire: ReadProbe, DecodeProbe and ValidateProbe give exactly what the
// shared reader in package wire gives, on a good file and on a broken one, so that the reference
// engine's --check and `reckon probe check` can never disagree about a file.
func TestContractWrappersAreWire(t *testing.T) {
	data, err := os.ReadFile(torchFixture)
	if err != nil {
		t.Fatal(err)
	}
	a, errA := ReadProbe(torchFixture)
	b, errB := wire.ReadAllReduceProbe(torchFixture)
	c, errC := DecodeProbe(bytes.NewReader(data))
	if errA != nil || errB != nil || errC != nil || !reflect.DeepEqual(a, b) || !reflect.DeepEqual(a, c) {
		t.Fatalf("good file: %v / %v / %v", errA, errB, errC)
	}
	if err := ValidateProbe(a); err != nil {
		t.Fatal(err)
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	broken := strings.Replace(string(data), `"world_size": 2`, `"world_size": 1`, 1)
	if err := os.WriteFile(bad, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errA = ReadProbe(bad)
	_, errB = wire.ReadAllReduceProbe(bad)
	var pe *wire.ProbeError
	if errA == nil || errB == nil || errA.Error() != errB.Error() || !errors.As(errA, &pe) || pe.File != bad {
		t.Fatalf("broken file: %v / %v", errA, errB)
	}
	if !strings.Contains(errA.Error(), "line 4 col 17: world_size: 1, expected the number of ranks, at least 2") {
		t.Errorf("error does not locate the problem: %v", errA)
	}
	a.WorldSize = 1
	if err := ValidateProbe(a); err == nil || !strings.Contains(err.Error(), "world_size: 1") {
		t.Errorf("ValidateProbe: %v", err)
	}
	if err := ValidateProbe(nil); err == nil {
		t.Error("ValidateProbe(nil) passed")
	}
}
