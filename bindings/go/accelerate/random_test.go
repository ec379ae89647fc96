package accelerate_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

// draw returns the values of acc.Rand(shape...).
func draw(t *testing.T, shape ...int64) []float32 {
	t.Helper()
	x, err := acc.Rand(shape...)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	v, err := x.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func forwardNoGrad(t *testing.T, m *acc.Model, x *acc.Tensor) []float32 {
	t.Helper()
	y, err := m.ForwardNoGrad(x)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	v, err := y.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRestoringTheRandomStateRepeatsTheDraws(t *testing.T) {
	if err := acc.SetSeed(42); err != nil {
		t.Fatal(err)
	}
	state, err := acc.RandomState()
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	if d := state.DType(); d != acc.Uint8 {
		t.Fatalf("state dtype %v", d)
	}
	if s, _ := state.Shape(); len(s) != 1 {
		t.Fatalf("state shape %v", s)
	}
	first := draw(t, 3)
	for _, v := range first {
		if v < 0 || v >= 1 {
			t.Fatalf("rand out of [0, 1): %v", first)
		}
	}
	if reflect.DeepEqual(first, draw(t, 3)) {
		t.Fatal("the stream did not move on")
	}
	if err := acc.SetRandomState(state); err != nil {
		t.Fatal(err)
	}
	if again := draw(t, 3); !reflect.DeepEqual(first, again) {
		t.Fatalf("after SetRandomState: %v, want %v", again, first)
	}
	if err := acc.SetSeed(42); err != nil {
		t.Fatal(err)
	}
	if again := draw(t, 3); !reflect.DeepEqual(first, again) {
		t.Fatalf("after SetSeed(42) again: %v, want %v", again, first)
	}
	// Device-specific on one process (index 0): the same seed.
	if err := acc.SetSeedWith(42, true, false); err != nil {
		t.Fatal(err)
	}
	if again := draw(t, 3); !reflect.DeepEqual(first, again) {
		t.Fatalf("after SetSeedWith(42, true, false): %v, want %v", again, first)
	}
}

func TestRandnIsFloat32OnTheCPUInTheShapeAsked(t *testing.T) {
	x, err := acc.Randn(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	shape, _ := x.Shape()
	dtype := x.DType()
	device := x.Device()
	if !reflect.DeepEqual(shape, []int64{2, 3}) || dtype != acc.Float32 || device != "cpu" {
		t.Fatalf("got shape %v, dtype %v, device %q", shape, dtype, device)
	}
	if _, err := acc.Randn(2, -1); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("negative dim: %v", err)
	}
}

func TestATensorThatIsNotARandomStateIsRefusedAndChangesNothing(t *testing.T) {
	state, err := acc.RandomState()
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	n := state.Numel()
	floats, _ := acc.Zeros(acc.Float32, "", n)
	defer floats.Close()
	threeBytes, _ := acc.FromBytes(make([]byte, 3), 3)
	defer threeBytes.Close()
	for _, bad := range []*acc.Tensor{floats, threeBytes} {
		var e *acc.Error
		if err := acc.SetRandomState(bad); !errors.As(err, &e) || e.Status != acc.StatusInvalidArgument {
			t.Fatalf("SetRandomState of a non-state: %v", err)
		}
	}
	if err := acc.SetRandomState(nil); !errors.Is(err, acc.ErrInvalidHandle) {
		t.Fatalf("SetRandomState(nil): %v", err)
	}
	next := draw(t, 3)
	if err := acc.SetRandomState(state); err != nil {
		t.Fatal(err)
	}
	if again := draw(t, 3); !reflect.DeepEqual(next, again) {
		t.Fatalf("a refused state changed the generator: %v, want %v", again, next)
	}
}

func TestWithoutGraphOptimisationTorchScriptGivesTheEagerNumbers(t *testing.T) {
	spec, err := acc.ModelFromSpec(`[{"type":"linear","in_features":4,"out_features":2}]`)
	if err != nil {
		t.Fatal(err)
	}
	defer spec.Close()
	x, err := acc.Rand(3, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	eager := forwardNoGrad(t, spec, x)
	// A layer-spec model always runs eagerly: accepted, no effect.
	if err := spec.SetGraphOptimization(false); err != nil {
		t.Fatal(err)
	}
	if got := forwardNoGrad(t, spec, x); !reflect.DeepEqual(got, eager) {
		t.Fatalf("spec model: %v, want %v", got, eager)
	}
	file := filepath.Join(t.TempDir(), "model.pt")
	if err := spec.SaveTorchScript(file); err != nil {
		t.Fatal(err)
	}
	script, err := acc.LoadTorchScript(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := script.SetGraphOptimization(false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // past the JIT's profiling runs
		if got := forwardNoGrad(t, script, x); !reflect.DeepEqual(got, eager) {
			t.Fatalf("TorchScript run %d: %v, want %v", i, got, eager)
		}
	}
	script.Close()
	if err := script.SetGraphOptimization(true); !errors.Is(err, acc.ErrInvalidHandle) {
		t.Fatalf("closed model: %v", err)
	}
}
