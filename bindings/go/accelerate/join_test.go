package accelerate_test

import (
	"errors"
	"strings"
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

// JoinUnevenInputs returns its end function (on one process the scope changes nothing).
func TestJoinUnevenInputsIsAScopeForPreparedModels(t *testing.T) {
	a := newCPUAccelerator(t, t.TempDir())
	defer a.Close()
	raw, err := acc.ModelFromSpec(`[{"type":"linear","in_features":2,"out_features":1}]`)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	model, err := a.PrepareModel(raw, acc.PlacementDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	x, _ := acc.FromFloat32s([]float32{1, 2}, 1, 2)
	defer x.Close()
	err = a.JoinUnevenInputs(model, acc.KeepEvenBatches, func() error {
		y, err := model.Forward(x)
		if err != nil {
			return err
		}
		return y.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := acc.ModelFromSpec(`[{"type":"linear","in_features":2,"out_features":1}]`)
	defer other.Close()
	ran := false
	if err := a.JoinUnevenInputs(other, acc.EvenBatchesOff, func() error { ran = true; return nil }); ran || !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "not prepared") {
		t.Fatalf("an unprepared model: %v", err)
	}
}
