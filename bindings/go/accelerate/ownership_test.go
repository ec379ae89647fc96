package accelerate_test

import (
	"errors"
	"strconv"
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

const (
	ownN, ownD, ownC, ownBatch = 3200, 784, 10, 64
	ownSpec                    = `[{"type":"linear","in_features":784,"out_features":32},{"type":"relu"},` +
		`{"type":"linear","in_features":32,"out_features":10}]`
)

// closed reports whether getter panics with the ErrInvalidHandle error (a closed object's getters do).
func closed[T any](getter func() T) (yes bool) {
	defer func() {
		if p := recover(); p != nil {
			err, ok := p.(error)
			yes = ok && errors.Is(err, acc.ErrInvalidHandle)
		}
	}()
	getter()
	return false
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func options(t *testing.T, kind acc.OptionsKind, kv ...string) *acc.Options {
	o, err := acc.NewOptions(kind)
	check(t, err)
	for i := 0; i < len(kv); i += 2 {
		check(t, o.Set(kv[i], kv[i+1]))
	}
	return o
}

func ownershipDataset(t *testing.T) *acc.Dataset {
	x := make([]float32, ownN*ownD)
	y := make([]int64, ownN)
	for i := range x {
		x[i] = float32(i%97) / 97
	}
	for i := range y {
		y[i] = int64(i % ownC)
	}
	xt, err := acc.FromFloat32s(x, ownN, ownD)
	check(t, err)
	defer xt.Close()
	yt, err := acc.FromInt64s(y, ownN)
	check(t, err)
	defer yt.Close()
	ds, err := acc.DatasetFromTensors(xt, yt)
	check(t, err)
	return ds
}

// 1 000 training steps that close nothing they make: ForEach owns the batches and the tensors
// taken from them, WithScope the step's own. Live handles and resident memory stay flat (1 000
// leaked 200 KB batches would be 200 MB).
func TestAThousandNaiveStepsStayFlat(t *testing.T) {
	baseline := settledLiveHandles()
	func() {
		ao := options(t, acc.AcceleratorOptions, "seed", "1")
		defer ao.Close()
		a, err := acc.NewAccelerator(ao)
		check(t, err)
		defer a.Close()
		ds := ownershipDataset(t)
		defer ds.Close()
		lo := options(t, acc.DataLoaderOptions, "batch_size", strconv.Itoa(ownBatch), "shuffle", "true")
		defer lo.Close()
		raw, err := acc.NewDataLoader(ds, lo)
		check(t, err)
		defer raw.Close()
		loader, err := a.PrepareDataLoader(raw, acc.PlacementDefault)
		check(t, err)
		defer loader.Close()
		rawModel, err := acc.ModelFromSpec(ownSpec)
		check(t, err)
		defer rawModel.Close()
		model, err := a.PrepareModel(rawModel, acc.PlacementDefault)
		check(t, err)
		defer model.Close()
		oo := options(t, acc.OptimizerOptions, "lr", "0.01")
		defer oo.Close()
		rawOpt, err := acc.NewOptimizer(model, "sgd", oo)
		check(t, err)
		defer rawOpt.Close()
		opt, err := a.PrepareOptimizer(rawOpt, acc.PlacementDefault)
		check(t, err)
		defer opt.Close()

		steps := 0
		var handlesAt50, rssAt50, maxHandles int64
		for steps < 1000 {
			err := loader.ForEach(func(batch *acc.TensorList) error {
				x, _ := batch.Get(0) // never closed: the batch's
				y, _ := batch.Get(1)
				err := acc.WithScope(func() error {
					logits, err := model.Forward(x) // never closed: the scope's
					if err != nil {
						return err
					}
					loss, err := acc.CrossEntropy(logits, y, acc.ReductionMean, 0)
					if err != nil {
						return err
					}
					if err := a.Backward(loss); err != nil {
						return err
					}
					if err := opt.Step(); err != nil {
						return err
					}
					return opt.ZeroGrad()
				})
				if err != nil {
					return err
				}
				// Measured after every step from the first of the second epoch (step 51) on: a batch
				// or tensor kept per step would add handles within each epoch.
				if steps++; steps == 51 {
					handlesAt50, rssAt50 = acc.LiveHandles(acc.HandleAny), rssKB(t)
				} else if h := acc.LiveHandles(acc.HandleAny); steps > 51 && h > maxHandles {
					maxHandles = h
				}
				if steps >= 1000 {
					return acc.Break
				}
				return nil
			})
			check(t, err)
		}
		growth := rssKB(t) - rssAt50
		t.Logf("1000 naive steps: handles %d at step 51, at most %d after; RSS growth after step 51: %d KiB",
			handlesAt50, maxHandles, growth)
		if maxHandles > handlesAt50 { // finalizers of earlier tests' objects may lower it
			t.Errorf("live handles grew from %d to %d", handlesAt50, maxHandles)
		}
		if growth > 64*1024 {
			t.Errorf("RSS grew by %d KiB", growth)
		}
	}()
	if got := acc.LiveHandles(acc.HandleAny); got > baseline {
		t.Errorf("live handles %d after closing everything, baseline %d", got, baseline)
	}
}

func TestForEachReleasesTheLastBatchUnlessKept(t *testing.T) {
	ds := ownershipDataset(t)
	defer ds.Close()
	lo := options(t, acc.DataLoaderOptions, "batch_size", "1600")
	defer lo.Close()
	loader, err := acc.NewDataLoader(ds, lo)
	check(t, err)
	defer loader.Close()
	var first, second *acc.TensorList
	var x *acc.Tensor
	check(t, loader.ForEach(func(batch *acc.TensorList) error {
		if first == nil {
			first = batch.Keep()
			x, err = first.Get(0)
			return err
		}
		second = batch
		return nil
	}))
	if closed(x.Numel) {
		t.Fatal("a kept batch did not keep its tensors")
	}
	if !closed(second.Len) {
		t.Fatal("the epoch's end did not release the last batch")
	}
	check(t, first.Close())
	if !closed(x.Numel) {
		t.Fatal("closing a batch did not close the tensors taken from it")
	}
}

func TestAScopeClosesWhatWasMadeInsideItButNotWhatWasKept(t *testing.T) {
	baseline := acc.LiveTensors()
	var kept, dropped *acc.Tensor
	check(t, acc.WithScope(func() error {
		return acc.WithScope(func() error {
			var err error
			if dropped, err = acc.FromFloat32s([]float32{1, 2}, 2); err != nil {
				return err
			}
			sum, err := dropped.Sum()
			kept = sum.Keep()
			return err
		})
	}))
	if !closed(dropped.Numel) {
		t.Fatal("the scope did not close what was made in it")
	}
	if v, err := kept.Item(); err != nil || v != 3 {
		t.Fatalf("kept: %v %v", v, err)
	}
	check(t, kept.Close())
	if got := acc.LiveTensors(); got > baseline {
		t.Fatalf("%d live tensors, baseline %d", got, baseline)
	}
}

func TestBreakEndsTheEpochSoLoadStateTakesTheLoader(t *testing.T) {
	dir := t.TempDir() + "/ckpt"
	ao := options(t, acc.AcceleratorOptions, "seed", "3")
	defer ao.Close()
	a, err := acc.NewAccelerator(ao)
	check(t, err)
	defer a.Close()
	ds := ownershipDataset(t)
	defer ds.Close()
	lo := options(t, acc.DataLoaderOptions, "batch_size", "320", "shuffle", "true")
	defer lo.Close()
	raw, err := acc.NewDataLoader(ds, lo)
	check(t, err)
	defer raw.Close()
	loader, err := a.PrepareDataLoader(raw, acc.PlacementDefault)
	check(t, err)
	defer loader.Close()
	seen := 0
	check(t, loader.ForEach(func(batch *acc.TensorList) error {
		if seen++; seen == 3 {
			if _, err := a.SaveState(dir); err != nil {
				return err
			}
			return acc.Break
		}
		return nil
	}))
	if in := loader.InEpoch(); in {
		t.Fatal("Break left the epoch open")
	}
	if e := loader.Epoch(); e != 1 {
		t.Fatalf("epoch %d after the break, want 1", e)
	}
	_, err = a.LoadState(dir) // refused mid-epoch
	check(t, err)
	count := func() int {
		n := 0
		check(t, loader.ForEach(func(*acc.TensorList) error { n++; return nil }))
		return n
	}
	if n := count(); n != 7 {
		t.Fatalf("the resumed epoch had %d batches, want 7", n)
	}
	if n := count(); n != 10 {
		t.Fatalf("the next epoch had %d batches, want 10", n)
	}
}
