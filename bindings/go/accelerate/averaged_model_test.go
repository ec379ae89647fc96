package accelerate_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

// Averaged models (PyTorch's AveragedModel): SWA's and EMA's averages of the trained weights, put
// into a model by Swap and CopyTo, moved by their state dict and kept by checkpoints.

const otherLinears = `[{"type":"linear","in_features":4,"out_features":5},{"type":"linear","in_features":5,"out_features":2}]`

var averagedNames = []string{"0.weight", "0.bias", "1.weight", "1.bias"}

func weightsOf(t *testing.T, m *acc.Model) [][]float32 {
	t.Helper()
	var out [][]float32
	for _, name := range averagedNames {
		out = append(out, paramValues(t, m, name))
	}
	return out
}

// averagesOf is the averages in the order of averagedNames (the state dict names them "module.<name>").
func averagesOf(t *testing.T, avg *acc.AveragedModel) [][]float32 {
	t.Helper()
	state, err := avg.StateDict()
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	var out [][]float32
	for _, name := range averagedNames {
		v, err := state.Find("module." + name)
		if err != nil {
			t.Fatal(err)
		}
		values, err := v.Float32s()
		v.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, values)
	}
	return out
}

func newAveragedModel(t *testing.T, m *acc.Model, opts *acc.Options) *acc.AveragedModel {
	t.Helper()
	avg, err := acc.NewAveragedModel(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	return avg
}

func averagedCount(t *testing.T, avg *acc.AveragedModel) int64 {
	t.Helper()
	n, err := avg.Count()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// twoLinearsUnderSGD is a model of two linear layers and an SGD over it, closed when the test ends.
func twoLinearsUnderSGD(t *testing.T) (*acc.Model, *acc.Optimizer) {
	t.Helper()
	m := newTwoLinears(t)
	t.Cleanup(func() { m.Close() })
	opt, err := acc.NewOptimizer(m, "sgd", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { opt.Close() })
	return m, opt
}

func TestSWAAveragesTheTrainedWeightsAndPutsThemIntoAModel(t *testing.T) {
	m, opt := twoLinearsUnderSGD(t)
	avg := newAveragedModel(t, m, nil)
	if n := averagedCount(t, avg); n != 0 {
		t.Fatalf("count before any update: %d", n)
	}
	var seen [][]float32
	for step := 0; step < 3; step++ {
		trainStep(t, m, opt)
		if err := avg.Update(m); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, paramValues(t, m, "1.bias"))
	}
	if n := averagedCount(t, avg); n != 3 {
		t.Fatalf("count after 3 updates: %d", n)
	}
	averages, trained := averagesOf(t, avg), weightsOf(t, m)
	for i, got := range averages[3] {
		if mean := (seen[0][i] + seen[1][i] + seen[2][i]) / 3; math.Abs(float64(got-mean)) > 1e-6 {
			t.Fatalf("1.bias[%d]: average %v, mean of the updates %v", i, got, mean)
		}
	}
	if reflect.DeepEqual(averages, trained) {
		t.Fatal("the averages are the trained weights")
	}

	if err := avg.Swap(m); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(weightsOf(t, m), averages) || !reflect.DeepEqual(averagesOf(t, avg), trained) {
		t.Fatal("Swap did not exchange the averages with the model's weights")
	}
	if err := avg.Swap(m); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(weightsOf(t, m), trained) || !reflect.DeepEqual(averagesOf(t, avg), averages) {
		t.Fatal("a second Swap did not restore the model's weights")
	}

	evaluation := newTwoLinears(t)
	defer evaluation.Close()
	if err := avg.CopyTo(evaluation); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(weightsOf(t, evaluation), averages) {
		t.Fatal("CopyTo did not write the averages")
	}
	other, err := acc.ModelFromSpec(otherLinears)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := avg.Update(other); !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "'0.weight'") {
		t.Fatalf("Update from another model: %v", err)
	}
	if err := avg.CopyTo(other); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("CopyTo another model: %v", err)
	}
	if n := averagedCount(t, avg); n != 3 || !reflect.DeepEqual(averagesOf(t, avg), averages) {
		t.Fatalf("a refused update changed the averages (count %d)", n)
	}

	if err := avg.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := avg.Count(); !errors.Is(err, acc.ErrInvalidHandle) {
		t.Fatalf("Count of a closed averaged model: %v", err)
	}
	if n := acc.LiveHandles(acc.HandleAveragedModel); n != 0 {
		t.Fatalf("%d averaged models alive after Close", n)
	}
}

func TestEMAAveragesAreMovedByStateDictAndKeptByCheckpoints(t *testing.T) {
	dir := t.TempDir()
	a := newCPUAccelerator(t, dir)
	defer a.Close()
	m, opt := twoLinearsUnderSGD(t)
	o, err := acc.NewOptions(acc.AveragedModelOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if err := o.SetString("strategy", "ema"); err != nil {
		t.Fatal(err)
	}
	if err := o.SetFloat("decay", 0.5); err != nil {
		t.Fatal(err)
	}
	avg := newAveragedModel(t, m, o)
	defer avg.Close()
	if err := a.RegisterAveragedModel(avg); err != nil {
		t.Fatal(err)
	}
	var updates [][]float32
	for step := 0; step < 2; step++ {
		trainStep(t, m, opt)
		if err := avg.Update(m); err != nil {
			t.Fatal(err)
		}
		updates = append(updates, paramValues(t, m, "0.weight"))
	}
	saved := averagesOf(t, avg)
	for i, got := range saved[0] {
		if mean := 0.5*updates[0][i] + 0.5*updates[1][i]; math.Abs(float64(got-mean)) > 1e-6 {
			t.Fatalf("0.weight[%d]: EMA (decay 0.5) %v, mean of the two updates %v", i, got, mean)
		}
	}

	written, err := a.SaveState(filepath.Join(dir, "ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(written, "custom_checkpoint_0.safetensors")); err != nil {
		t.Fatal(err)
	}
	trainStep(t, m, opt)
	if err := avg.Update(m); err != nil {
		t.Fatal(err)
	}
	if _, err := a.LoadState(written); err != nil {
		t.Fatal(err)
	}
	if n := averagedCount(t, avg); n != 2 || !reflect.DeepEqual(averagesOf(t, avg), saved) {
		t.Fatalf("LoadState did not restore the averages (count %d)", n)
	}

	state, err := avg.StateDict()
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	copied := newAveragedModel(t, m, o)
	defer copied.Close()
	if err := copied.LoadStateDict(state); err != nil {
		t.Fatal(err)
	}
	if n := averagedCount(t, copied); n != 2 || !reflect.DeepEqual(averagesOf(t, copied), saved) {
		t.Fatalf("LoadStateDict did not load the averages (count %d)", n)
	}
	other, err := acc.ModelFromSpec(otherLinears)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	foreign := newAveragedModel(t, other, nil)
	defer foreign.Close()
	foreignState, err := foreign.StateDict()
	if err != nil {
		t.Fatal(err)
	}
	defer foreignState.Close()
	if err := avg.LoadStateDict(foreignState); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("LoadStateDict of another model's averages: %v", err)
	}
	if !reflect.DeepEqual(averagesOf(t, avg), saved) {
		t.Fatal("a refused state changed the averages")
	}
}

// UpdateBN: a BatchNorm layer's statistics become the plain average over the loader's epoch (two
// equal batches: the mean of every sample), counted in num_batches_tracked.
func TestUpdateBNAveragesTheStatisticsOverAnEpoch(t *testing.T) {
	model, err := acc.ModelFromSpec(`[{"type":"batchnorm1d","num_features":2}]`)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	x, _ := acc.FromFloat32s([]float32{1, 10, 3, 20, 5, 30, 7, 40, 2, 50, 4, 60, 6, 70, 8, 80}, 8, 2)
	defer x.Close()
	ds, err := acc.DatasetFromTensors(x)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	o, _ := acc.NewOptions(acc.DataLoaderOptions)
	defer o.Close()
	o.SetInt("batch_size", 4)
	dl, err := acc.NewDataLoader(ds, o)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	if err := model.UpdateBN(dl); err != nil {
		t.Fatal(err)
	}
	state, err := model.StateDict()
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	mean, _ := state.Find("0.running_mean")
	defer mean.Close()
	count, _ := state.Find("0.num_batches_tracked")
	defer count.Close()
	m, _ := mean.Float32s()
	if math.Abs(float64(m[0])-4.5) > 1e-5 || math.Abs(float64(m[1])-45) > 1e-5 {
		t.Fatalf("running_mean %v, want [4.5 45]", m)
	}
	if n, _ := count.Int64s(); !reflect.DeepEqual(n, []int64{2}) {
		t.Fatalf("num_batches_tracked %v, want [2]", n)
	}
}
