package accelerate_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

// LOMO updates inside LomoBackward: without weight decay it is SGD's step, bit for bit; with
// clip_grad_norm, LomoGradNorm measures first and BackwardLR applies.
func TestLomoUpdatesInsideBackward(t *testing.T) {
	a := newCPUAccelerator(t, t.TempDir())
	defer a.Close()
	lomoModel, sgdModel := newTwoLinears(t), newTwoLinears(t)
	defer lomoModel.Close()
	defer sgdModel.Close()
	lomo, err := acc.NewOptimizer(lomoModel, "lomo", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lomo.Close()
	o, _ := acc.NewOptions(acc.OptimizerOptions)
	defer o.Close()
	if err := o.SetFloat("lr", 0.5); err != nil {
		t.Fatal(err)
	}
	sgd, err := acc.NewOptimizer(sgdModel, "sgd", o)
	if err != nil {
		t.Fatal(err)
	}
	defer sgd.Close()
	state, err := sgdModel.StateDict()
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	if err := lomoModel.LoadStateDict(state, true); err != nil {
		t.Fatal(err)
	}
	prepared, err := a.PrepareModel(lomoModel, acc.PlacementDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer prepared.Close()
	preparedOpt, err := a.PrepareOptimizer(lomo, acc.PlacementDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer preparedOpt.Close()
	loss := mseOf(t, prepared)
	defer loss.Close()
	if err := a.LomoBackward(loss, 0.5); err != nil {
		t.Fatal(err)
	}
	trainStep(t, sgdModel, sgd)
	for _, name := range []string{"0.weight", "0.bias", "1.weight", "1.bias"} {
		if got, want := paramValues(t, prepared, name), paramValues(t, sgdModel, name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: LOMO %v, SGD %v", name, got, want)
		}
	}
	again := mseOf(t, prepared)
	defer again.Close()
	if err := a.Backward(again); !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "LOMO optimizer is prepared") {
		t.Fatalf("a plain backward with LOMO prepared: %v", err)
	}
	if _, err := a.LomoGradNorm(again); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("grad_norm without clip_grad_norm: %v", err)
	}
	if err := a.BackwardLR(again, 0.5); err != nil {
		t.Fatal(err)
	}
}
