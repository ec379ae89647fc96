// A program that uses the installed Go module (github.com/accelerate-cpp/accelerate/go, replaced by
// the installed tree's share/accelerate/go) and the installed accelerate-go.pc: trains a small model
// for one epoch and prints one line the test checks. Runs on 1 or N processes. Its samples come from a
// Go callback on the loader's threads, so the library's wrapper calls back into the program.
package main

import (
	"fmt"
	"log"
	"os"
	"strings"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

// loadedFrom is the file a loaded library was mapped from (/proc/self/maps: the file a symlink such
// as libaccelerate.so.0 points to).
func loadedFrom(name string) string {
	maps, _ := os.ReadFile("/proc/self/maps")
	for _, line := range strings.Split(string(maps), "\n") {
		if at := strings.Index(line, "/"); at >= 0 && strings.Contains(line[at:], "/"+name) {
			return line[at:]
		}
	}
	return "?"
}

func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}

func main() {
	x := make([]float32, 64*4)
	y := make([]int64, 64)
	for i := range x {
		x[i] = float32(i%13) / 13
	}
	for i := range y {
		y[i] = int64(i % 2)
	}
	ao := must(acc.NewOptions(acc.AcceleratorOptions))
	must(0, ao.Set("seed", "5"))
	a := must(acc.NewAccelerator(ao))
	defer a.Close()
	ds := must(acc.DatasetFromFunc(64, func(i int64) ([]*acc.Tensor, error) {
		return []*acc.Tensor{must(acc.FromFloat32s(x[4*i:4*i+4], 4)), must(acc.FromInt64s(y[i:i+1]))}, nil
	}))
	lo := must(acc.NewOptions(acc.DataLoaderOptions))
	must(0, lo.Set("batch_size", "8"))
	must(0, lo.Set("num_workers", "2"))
	loader := must(a.PrepareDataLoader(must(acc.NewDataLoader(ds, lo)), acc.PlacementDefault))
	model := must(a.PrepareModel(must(acc.ModelFromSpec(`[{"type":"linear","in_features":4,"out_features":2}]`)), acc.PlacementDefault))
	oo := must(acc.NewOptions(acc.OptimizerOptions))
	must(0, oo.Set("lr", "0.1"))
	opt := must(a.PrepareOptimizer(must(acc.NewOptimizer(model, "sgd", oo)), acc.PlacementDefault))
	steps := 0
	err := loader.ForEach(func(batch *acc.TensorList) error {
		steps++
		return acc.WithScope(func() error {
			logits := must(model.Forward(must(batch.Get(0))))
			loss := must(acc.CrossEntropy(logits, must(batch.Get(1)), acc.ReductionMean, 0))
			if err := a.Backward(loss); err != nil {
				return err
			}
			if err := opt.Step(); err != nil {
				return err
			}
			return opt.ZeroGrad()
		})
	})
	if err != nil {
		log.Fatal(err)
	}
	rank, n := a.ProcessIndex(), a.NumProcesses()
	fmt.Printf("go consumer: accelerate %s, rank %d of %d, %d steps, libaccelerate from %s\n",
		acc.Version(), rank, n, steps, loadedFrom("libaccelerate.so"))
}
