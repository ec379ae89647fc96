package accelerate_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

const twoLinears = `[{"type":"linear","in_features":4,"out_features":3},{"type":"linear","in_features":3,"out_features":2}]`

func newTwoLinears(t *testing.T) *acc.Model {
	t.Helper()
	m, err := acc.ModelFromSpec(twoLinears)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func paramValues(t *testing.T, m *acc.Model, name string) []float32 {
	t.Helper()
	p, err := m.Parameter(name)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	v, err := p.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// mseOf is the MSE loss of m on a fixed batch.
func mseOf(t *testing.T, m *acc.Model) *acc.Tensor {
	t.Helper()
	x, _ := acc.FromFloat32s([]float32{0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8}, 2, 4)
	defer x.Close()
	target, _ := acc.FromFloat32s([]float32{1, 0, 0, 1}, 2, 2)
	defer target.Close()
	y, err := m.Forward(x)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	loss, err := acc.MSELoss(y, target, acc.ReductionMean)
	if err != nil {
		t.Fatal(err)
	}
	return loss
}

// trainStep takes one step on that loss.
func trainStep(t *testing.T, m *acc.Model, opt *acc.Optimizer) {
	t.Helper()
	loss := mseOf(t, m)
	defer loss.Close()
	if err := loss.Backward(); err != nil {
		t.Fatal(err)
	}
	if err := opt.Step(); err != nil {
		t.Fatal(err)
	}
}

func TestFrozenParametersAreNotUpdated(t *testing.T) {
	m := newTwoLinears(t)
	defer m.Close()
	if n, err := m.SetRequiresGrad("0.*", false); n != 2 || err != nil {
		t.Fatalf("freezing 0.*: %d, %v", n, err)
	}
	w0, w1 := paramValues(t, m, "0.weight"), paramValues(t, m, "1.weight")
	opt, err := acc.NewOptimizer(m, "sgd", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	trainStep(t, m, opt)
	if got := paramValues(t, m, "0.weight"); !reflect.DeepEqual(got, w0) {
		t.Fatalf("frozen 0.weight moved: %v, was %v", got, w0)
	}
	if got := paramValues(t, m, "1.weight"); reflect.DeepEqual(got, w1) {
		t.Fatal("trainable 1.weight did not move")
	}
	if _, err := m.SetRequiresGrad("encoder.*", false); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "encoder.*") {
		t.Fatalf("a pattern that matches nothing: %v", err)
	}
	// The optimizer was made without them: unfreezing is refused while it lives.
	if _, err := m.SetRequiresGrad("0.*", true); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "never be trained") {
		t.Fatalf("unfreezing under an optimizer made without them: %v", err)
	}
	opt.Close()
	if n, err := m.SetRequiresGrad("0.*", true); n != 2 || err != nil {
		t.Fatalf("unfreezing 0.*: %d, %v", n, err)
	}
}

func TestAPreparedModelCannotBeFrozen(t *testing.T) {
	a := newCPUAccelerator(t, t.TempDir())
	defer a.Close()
	m := newTwoLinears(t)
	defer m.Close()
	prepared, err := a.PrepareModel(m, acc.PlacementDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer prepared.Close()
	if _, err := prepared.SetRequiresGrad("0.*", false); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("prepared model: %v", err)
	}
}

func TestMatchingTrainableParametersMoveIntoANewGroup(t *testing.T) {
	m := newTwoLinears(t)
	defer m.Close()
	if _, err := m.SetRequiresGrad("0.*", false); err != nil {
		t.Fatal(err)
	}
	opt, err := acc.NewOptimizer(m, "sgd", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	overrides, _ := acc.NewOptions(acc.OptimizerOptions)
	defer overrides.Close()
	if err := overrides.SetFloat("lr", 0.5); err != nil {
		t.Fatal(err)
	}
	if n, err := opt.AddParamGroupMatching("*.bias", overrides); n != 1 || err != nil { // 0.bias is frozen
		t.Fatalf("moved %d, %v", n, err)
	}
	if groups, _ := opt.NumParamGroups(); groups != 2 {
		t.Fatalf("%d groups", groups)
	}
	if lr, _ := opt.LR(1); lr != 0.5 {
		t.Fatalf("the new group's lr is %v", lr)
	}
	if _, err := opt.AddParamGroupMatching("nothing.*", nil); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("a pattern that matches nothing: %v", err)
	}
}
