package accelerate_test

import (
	"errors"
	"strings"
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

// LocalSGD hands f its step function (on one process it only counts steps).
func TestLocalSGDIsAScopeWithStepsForPreparedModels(t *testing.T) {
	a := newCPUAccelerator(t, t.TempDir())
	t.Cleanup(func() { a.Close() }) // after the models (cleanups run last first)
	model := preparedLinear(t, a)
	var kept func() error
	err := a.LocalSGD(model, 2, true, func(step func() error) error {
		kept = step
		for i := 0; i < 3; i++ {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := kept(); !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "without local_sgd_begin") {
		t.Fatalf("a step after the scope: %v", err)
	}
	other, _ := acc.ModelFromSpec(linearSpec)
	defer other.Close()
	ran := false
	if err := a.LocalSGD(other, 2, true, func(func() error) error { ran = true; return nil }); ran || !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "not prepared") {
		t.Fatalf("an unprepared model: %v", err)
	}
	if err := a.LocalSGD(model, 0, true, func(func() error) error { return nil }); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("local_sgd_steps 0: %v", err)
	}
}
