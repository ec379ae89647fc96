package main

import (
	"fmt"
	"time"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

// closer collects what a function must close on return, in reverse order.
type closer []interface{ Close() error }

func (c *closer) add(x interface{ Close() error }) { *c = append(*c, x) }
func (c closer) close() {
	for i := len(c) - 1; i >= 0; i-- {
		c[i].Close()
	}
}

// features gets a batch's inputs and labels (the batch's: ForEach releases them with it).
func features(batch *acc.TensorList) (x, y *acc.Tensor, err error) {
	if x, err = batch.Get(0); err != nil {
		return nil, nil, err
	}
	y, err = batch.Get(1)
	return x, y, err
}

// trainEpoch runs one epoch and returns the summed loss, the number of batches and of samples.
// ForEach owns each batch and the tensors taken from it; WithScope closes what a step makes.
func trainEpoch(a *acc.Accelerator, model *acc.Model, opt *acc.Optimizer, sched *acc.Scheduler,
	loader *acc.DataLoader) (lossSum, batches, samples float64, err error) {
	err = loader.ForEach(func(batch *acc.TensorList) error {
		return acc.WithScope(func() error {
			loss, n, err := trainStep(a, model, opt, sched, batch)
			lossSum, batches, samples = lossSum+loss, batches+1, samples+float64(n)
			return err
		})
	})
	return lossSum, batches, samples, err
}

func trainStep(a *acc.Accelerator, model *acc.Model, opt *acc.Optimizer, sched *acc.Scheduler,
	batch *acc.TensorList) (float64, int64, error) {
	x, y, err := features(batch)
	if err != nil {
		return 0, 0, err
	}
	var loss *acc.Tensor
	err = a.Accumulate(func() error {
		logits, err := model.Forward(x)
		if err != nil {
			return err
		}
		if loss, err = acc.CrossEntropy(logits, y, acc.ReductionMean, 0); err != nil {
			return err
		}
		// a.Backward instead of the loss's own backward.
		for _, step := range []func() error{func() error { return a.Backward(loss) }, opt.Step, sched.Step, opt.ZeroGrad} {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	value, err := loss.Item()
	return value, y.Numel(), err
}

// evaluate returns the test accuracy in percent over every process's share of the test split.
func evaluate(a *acc.Accelerator, model *acc.Model, loader *acc.DataLoader) (float64, error) {
	var correct, seen int64
	if err := model.SetTraining(false); err != nil {
		return 0, err
	}
	err := loader.ForEach(func(batch *acc.TensorList) error {
		return acc.WithScope(func() error {
			c, n, err := evalBatch(model, batch)
			correct, seen = correct+c, seen+n
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	if err := model.SetTraining(true); err != nil {
		return 0, err
	}
	counts, err := sumAcrossProcesses(a, float64(correct), float64(seen))
	if err != nil || counts[1] == 0 {
		return 0, err
	}
	return 100 * counts[0] / counts[1], nil
}

func evalBatch(model *acc.Model, batch *acc.TensorList) (correct, seen int64, err error) {
	x, y, err := features(batch)
	if err != nil {
		return 0, 0, err
	}
	logits, err := model.ForwardNoGrad(x)
	if err != nil {
		return 0, 0, err
	}
	pred, err := logits.Argmax(1, false)
	if err != nil {
		return 0, 0, err
	}
	if correct, err = pred.CountEqual(y); err != nil {
		return 0, 0, err
	}
	return correct, y.Numel(), nil
}

func run(cfg config) (float64, error) {
	var c closer
	defer c.close()
	// keep records x for closing on return, or the first error of a step.
	var first error
	keep := func(x interface{ Close() error }, err error) {
		if err != nil && first == nil {
			first = err
		} else if err == nil {
			c.add(x)
		}
	}
	// 1. The accelerator: settings from the program, else from accelerate-launch's environment.
	accOpts, err := options(acc.AcceleratorOptions, map[string]any{"seed": 42})
	keep(accOpts, err)
	if first != nil {
		return 0, first
	}
	a, err := acc.NewAccelerator(accOpts)
	keep(a, err)
	train, err := loadSplit(cfg.data, "train", cfg.trainSamples)
	keep(train, err)
	test, err := loadSplit(cfg.data, "t10k", cfg.testSamples)
	keep(test, err)
	if first != nil {
		return 0, first
	}
	loaderOpts, err := options(acc.DataLoaderOptions, map[string]any{"batch_size": cfg.batchSize, "shuffle": true})
	keep(loaderOpts, err)
	testOpts, err := options(acc.DataLoaderOptions, map[string]any{"batch_size": 1000, "shuffle": false})
	keep(testOpts, err)
	if first != nil {
		return 0, first
	}
	rawTrain, err := acc.NewDataLoader(train, loaderOpts)
	keep(rawTrain, err)
	rawTest, err := acc.NewDataLoader(test, testOpts)
	keep(rawTest, err)
	rawModel, err := acc.ModelFromSpec(modelSpec)
	keep(rawModel, err)
	optOpts, err := options(acc.OptimizerOptions, map[string]any{"lr": cfg.lr})
	keep(optOpts, err)
	if first != nil {
		return 0, first
	}
	rawOpt, err := acc.NewOptimizer(rawModel, "adamw", optOpts)
	keep(rawOpt, err)
	if first != nil {
		return 0, first
	}
	stepsPerEpoch := rawTrain.Len()
	schedOpts, err := options(acc.SchedulerOptions, map[string]any{
		"num_warmup_steps": stepsPerEpoch / 10, "num_training_steps": stepsPerEpoch * int64(cfg.epochs)})
	keep(schedOpts, err)
	if first != nil {
		return 0, first
	}
	rawSched, err := acc.NewScheduler(rawOpt, "cosine", schedOpts)
	keep(rawSched, err)
	if first != nil {
		return 0, first
	}
	// 2. Prepare: everything moves to the accelerator's device and gets Accelerate's semantics.
	model, err := a.PrepareModel(rawModel, acc.PlacementDefault)
	keep(model, err)
	opt, err := a.PrepareOptimizer(rawOpt, acc.PlacementDefault)
	keep(opt, err)
	trainLoader, err := a.PrepareDataLoader(rawTrain, acc.PlacementDefault)
	keep(trainLoader, err)
	sched, err := a.PrepareScheduler(rawSched)
	keep(sched, err)
	testLoader, err := a.PrepareDataLoader(rawTest, acc.PlacementDefault)
	keep(testLoader, err)
	if first != nil {
		return 0, first
	}
	procs := a.NumProcesses()
	device := a.Device()
	size := train.Size()
	a.Print(fmt.Sprintf("training on %d process(es), %s: %d samples, %d steps per epoch", procs, device, size, stepsPerEpoch))
	for epoch := 0; epoch < cfg.epochs; epoch++ {
		start := time.Now()
		lossSum, batches, samples, err := trainEpoch(a, model, opt, sched, trainLoader)
		if err != nil {
			return 0, err
		}
		totals, err := sumAcrossProcesses(a, lossSum, batches, samples)
		if err != nil {
			return 0, err
		}
		mean := 0.0
		if totals[1] > 0 {
			mean = totals[0] / totals[1]
		}
		a.Print(fmt.Sprintf("epoch %d/%d  loss %.4f  %.0f samples/s", epoch+1, cfg.epochs, mean,
			totals[2]/time.Since(start).Seconds()))
	}
	accuracy, err := evaluate(a, model, testLoader)
	if err != nil {
		return 0, err
	}
	a.Print(fmt.Sprintf("test accuracy %.2f%%", accuracy))
	if cfg.save != "" {
		unwrapped, err := a.UnwrapModel(model)
		if err != nil {
			return 0, err
		}
		if a.IsMainProcess() { // one file for the job, as Accelerate's recipe writes it
			err = unwrapped.SaveTorchScript(cfg.save)
		}
		unwrapped.Close()
		if err != nil {
			return 0, err
		}
		a.Print("saved the trained model to " + cfg.save + " (TorchScript)")
		if err := a.SaveModel(model, "fashion_mnist_model", ""); err != nil {
			return 0, err
		}
		a.Print("saved the weights to fashion_mnist_model/model.safetensors")
	}
	return accuracy, nil
}
