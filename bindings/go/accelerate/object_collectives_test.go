package accelerate_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

// GatherObject and BroadcastObject carry bytes (NUL included) through; on one process each returns its own.
func TestObjectCollectivesCarryBytesWhole(t *testing.T) {
	a := newCPUAccelerator(t, t.TempDir())
	defer a.Close()
	mine := []byte{1, 0, 2, 0xff}
	all, err := a.GatherObject(mine, "objects")
	if err != nil || len(all) != 1 || !bytes.Equal(all[0], mine) {
		t.Fatalf("GatherObject: %v %v", all, err)
	}
	got, err := a.BroadcastObject(mine, 0, "object")
	if err != nil || !bytes.Equal(got, mine) {
		t.Fatalf("BroadcastObject: %v %v", got, err)
	}
	if got, err := a.BroadcastObject(nil, 0, ""); err != nil || len(got) != 0 {
		t.Fatalf("BroadcastObject of nothing: %v %v", got, err)
	}
	if _, err := a.BroadcastObject(mine, 1, "object"); !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "source process 1") {
		t.Fatalf("a source that is not in the job: %v", err)
	}
}
