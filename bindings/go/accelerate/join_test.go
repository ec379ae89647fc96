package accelerate_test

import (
	"errors"
	"strings"
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

const linearSpec = `[{"type":"linear","in_features":2,"out_features":1}]`

// preparedLinear is a linear model of 2 inputs prepared by a (both handles closed after the test).
func preparedLinear(t *testing.T, a *acc.Accelerator) *acc.Model {
	raw, err := acc.ModelFromSpec(linearSpec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	model, err := a.PrepareModel(raw, acc.PlacementDefault)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	return model
}

// JoinUnevenInputs returns its end function (on one process the scope changes nothing).
func TestJoinUnevenInputsIsAScopeForPreparedModels(t *testing.T) {
	a := newCPUAccelerator(t, t.TempDir())
	t.Cleanup(func() { a.Close() }) // after the models (cleanups run last first)
	model := preparedLinear(t, a)
	x, _ := acc.FromFloat32s([]float32{1, 2}, 1, 2)
	defer x.Close()
	err := a.JoinUnevenInputs(model, acc.KeepEvenBatches, func() error {
		y, err := model.Forward(x)
		if err != nil {
			return err
		}
		return y.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := acc.ModelFromSpec(linearSpec)
	defer other.Close()
	ran := false
	if err := a.JoinUnevenInputs(other, acc.EvenBatchesOff, func() error { ran = true; return nil }); ran || !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "not prepared") {
		t.Fatalf("an unprepared model: %v", err)
	}
}
