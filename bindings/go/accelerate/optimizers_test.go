package accelerate_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

// The optimizers chosen by name: each one trains, and Adafactor's relative step has no lr.
func TestEveryOptimizerTrains(t *testing.T) {
	for _, algorithm := range []string{"rmsprop", "adagrad", "radam", "nadam", "adamax", "adadelta", "rprop", "asgd", "lion", "adafactor"} {
		m := newTwoLinears(t)
		opt, err := acc.NewOptimizer(m, algorithm, nil)
		if err != nil {
			t.Fatalf("%s: %v", algorithm, err)
		}
		before := paramValues(t, m, "0.weight")
		trainStep(t, m, opt)
		if reflect.DeepEqual(before, paramValues(t, m, "0.weight")) {
			t.Errorf("%s did not move 0.weight", algorithm)
		}
		opt.Close()
		m.Close()
	}
}

func TestAdafactorWithARelativeStepHasNoLearningRate(t *testing.T) {
	m := newTwoLinears(t)
	defer m.Close()
	opt, err := acc.NewOptimizer(m, "adafactor", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	if _, err := opt.LR(0); !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "relative_step") {
		t.Fatalf("LR of a relative-step group: %v", err)
	}
	o, _ := acc.NewOptions(acc.OptimizerOptions)
	defer o.Close()
	if err := o.SetFloat("lr", 0.01); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.NewOptimizer(m, "adafactor", o); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("lr with relative_step: %v", err)
	}
	if err := o.SetBool("relative_step", false); err != nil {
		t.Fatal(err)
	}
	fixed, err := acc.NewOptimizer(m, "adafactor", o)
	if err != nil {
		t.Fatal(err)
	}
	defer fixed.Close()
	if lr, err := fixed.LR(0); lr != 0.01 || err != nil {
		t.Fatalf("LR: %v, %v", lr, err)
	}
}
