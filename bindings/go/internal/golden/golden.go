// Package golden runs bindings/golden/golden.c's scenario through the Go binding and prints the
// bits of every number the same way, so the outputs can be compared byte for byte.
package golden

import (
	"fmt"
	"math"
	"os"
	"strings"

	acc "accelerate/go/accelerate"
)

const (
	n, d, classes, epochs = 64, 8, 3, 2
	spec                  = `[{"type":"linear","in_features":8,"out_features":16},{"type":"relu"},` +
		`{"type":"linear","in_features":16,"out_features":3}]`
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}

func putFloats(out *strings.Builder, label string, t *acc.Tensor) {
	v := must(t.Float32s())
	fmt.Fprintf(out, "%s %d", label, len(v))
	for _, f := range v {
		fmt.Fprintf(out, " %08x", math.Float32bits(f))
	}
	out.WriteString("\n")
}

func options(kind acc.OptionsKind, set func(o *acc.Options)) *acc.Options {
	o := must(acc.NewOptions(kind))
	set(o)
	return o
}

// Run writes <prefix>.rank<N> and returns its path. Failures panic (it is a test fixture).
func Run(prefix string) (path string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("golden: %v", p)
		}
	}()
	x := make([]float32, n*d)
	y := make([]int64, n)
	for i := 0; i < n; i++ {
		for j := 0; j < d; j++ {
			x[i*d+j] = float32((i*7+j*3)%17-8) / 16.0
		}
		y[i] = int64((i * 5) % classes)
	}
	ao := options(acc.AcceleratorOptions, func(o *acc.Options) { check(o.SetBool("cpu", true)); check(o.SetInt("seed", 1234)) })
	defer ao.Close()
	a := must(acc.NewAccelerator(ao))
	defer a.Close()
	rank := must(a.ProcessIndex())
	xt := must(acc.FromFloat32s(x, n, d))
	defer xt.Close()
	yt := must(acc.FromInt64s(y, n))
	defer yt.Close()
	ds := must(acc.DatasetFromTensors(xt, yt))
	defer ds.Close()
	lo := options(acc.DataLoaderOptions, func(o *acc.Options) {
		check(o.SetInt("batch_size", 8))
		check(o.SetBool("shuffle", true))
		check(o.SetInt("seed", 7))
	})
	defer lo.Close()
	rawLoader := must(acc.NewDataLoader(ds, lo))
	defer rawLoader.Close()
	rawModel := must(acc.ModelFromSpec(spec))
	defer rawModel.Close()
	oo := options(acc.OptimizerOptions, func(o *acc.Options) { check(o.SetFloat("lr", 0.01)) })
	defer oo.Close()
	rawOpt := must(acc.NewOptimizer(rawModel, "adamw", oo))
	defer rawOpt.Close()
	so := options(acc.SchedulerOptions, func(o *acc.Options) {
		check(o.SetInt("num_warmup_steps", 2))
		check(o.SetInt("num_training_steps", 20))
	})
	defer so.Close()
	rawSched := must(acc.NewScheduler(rawOpt, "linear", so))
	defer rawSched.Close()
	model := must(a.PrepareModel(rawModel, acc.PlacementDefault))
	defer model.Close()
	opt := must(a.PrepareOptimizer(rawOpt, acc.PlacementDefault))
	defer opt.Close()
	loader := must(a.PrepareDataLoader(rawLoader, acc.PlacementDefault))
	defer loader.Close()
	sched := must(a.PrepareScheduler(rawSched))
	defer sched.Close()

	var out strings.Builder
	steps := 0
	for epoch := 0; epoch < epochs; epoch++ {
		for {
			batch := must(loader.Next())
			if batch == nil {
				break
			}
			bx, by := must(batch.Get(0)), must(batch.Get(1))
			end := must(a.Accumulate())
			logits := must(model.Forward(bx))
			loss := must(acc.CrossEntropy(logits, by, acc.ReductionMean, 0))
			check(a.Backward(loss))
			check(opt.Step())
			check(sched.Step())
			check(opt.ZeroGrad())
			check(end())
			fmt.Fprintf(&out, "loss %d %016x\n", steps, math.Float64bits(must(loss.Item())))
			all := must(a.Gather(loss, "loss"))
			putFloats(&out, fmt.Sprintf("gather %d", steps), all)
			total := must(a.Reduce(logits, acc.ReductionSum, "logits"))
			putFloats(&out, fmt.Sprintf("reduce %d", steps), total)
			steps++
			for _, t := range []*acc.Tensor{bx, by, logits, loss, all, total} {
				check(t.Close())
			}
			check(batch.Close())
		}
	}
	for _, name := range must(model.ParameterNames()) {
		p := must(model.Parameter(name))
		putFloats(&out, "param "+name, p)
		check(p.Close())
	}
	path = fmt.Sprintf("%s.rank%d", prefix, rank)
	return path, os.WriteFile(path, []byte(out.String()), 0o644)
}
