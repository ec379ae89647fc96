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

// PyTorch's optimizer.state[p][field], read by parameter name.
func TestAParametersStateIsReadByName(t *testing.T) {
	m := newTwoLinears(t)
	defer m.Close()
	opt, err := acc.NewOptimizer(m, "asgd", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	if _, err := opt.State("0.weight", "ax"); !errors.Is(err, acc.ErrNotInitialized) {
		t.Fatalf("state before the first step: %v", err)
	}
	trainStep(t, m, opt)
	if fields, err := opt.StateFields("0.weight"); err != nil || !reflect.DeepEqual(fields, []string{"ax", "eta", "mu", "step"}) {
		t.Fatalf("fields: %v, %v", fields, err)
	}
	ax, err := opt.State("0.weight", "ax")
	if err != nil {
		t.Fatal(err)
	}
	defer ax.Close()
	values, err := ax.Float32s()
	if err != nil || !reflect.DeepEqual(values, paramValues(t, m, "0.weight")) { // before t0, the latest weights
		t.Fatalf("ax %v (%v), weights %v", values, err, paramValues(t, m, "0.weight"))
	}
	if _, err := opt.State("0.weight", "sum"); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "it keeps ax, eta, mu, step") {
		t.Fatalf("unknown field: %v", err)
	}
}
