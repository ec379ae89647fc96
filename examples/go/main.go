// Command fashion_mnist is examples/c/fashion_mnist.c through the Go binding: a small CNN trained
// on Fashion-MNIST with Accelerate's conversion (create an accelerator, prepare, backward).
//
//	PKG_CONFIG_PATH=build/pkgconfig go run . [-epochs N] [-batch-size N] [-lr X] [-train-samples N]
//	    [-test-samples N] [-data DIR] [-save FILE.pt] [-min-accuracy PCT]
//
// Exits 3 when the test accuracy is below -min-accuracy, 1 on an error.
package main

import (
	"flag"
	"fmt"
	"os"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

const modelSpec = `[{"type":"conv2d","in_channels":1,"out_channels":32,"kernel_size":3,"padding":1},
 {"type":"relu"}, {"type":"maxpool2d","kernel_size":2},
 {"type":"conv2d","in_channels":32,"out_channels":64,"kernel_size":3,"padding":1},
 {"type":"relu"}, {"type":"maxpool2d","kernel_size":2},
 {"type":"flatten"},
 {"type":"linear","in_features":3136,"out_features":128}, {"type":"relu"},
 {"type":"dropout","p":0.25},
 {"type":"linear","in_features":128,"out_features":10}]`

type config struct {
	epochs, batchSize         int
	lr, minAccuracy           float64
	trainSamples, testSamples int64
	data, save                string
}

func main() {
	var c config
	flag.IntVar(&c.epochs, "epochs", 3, "training epochs")
	flag.IntVar(&c.batchSize, "batch-size", 64, "batch size per process")
	flag.Float64Var(&c.lr, "lr", 2e-3, "AdamW learning rate")
	flag.Int64Var(&c.trainSamples, "train-samples", 0, "use only the first N training samples (0: all)")
	flag.Int64Var(&c.testSamples, "test-samples", 0, "use only the first N test samples (0: all)")
	flag.StringVar(&c.data, "data", "/usr/share/datasets/fashion-mnist", "folder of the IDX files")
	flag.StringVar(&c.save, "save", "fashion_mnist.pt", "TorchScript file for the trained model (\"\": none)")
	flag.Float64Var(&c.minAccuracy, "min-accuracy", 0, "exit 3 below this test accuracy (percent)")
	flag.Parse()
	if c.epochs < 1 || c.batchSize < 1 {
		fmt.Fprintln(os.Stderr, "-epochs and -batch-size must be >= 1")
		os.Exit(2)
	}
	accuracy, err := run(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	if accuracy < c.minAccuracy {
		os.Exit(3)
	}
}

// options makes Options of a kind from name/value pairs.
func options(kind acc.OptionsKind, kv map[string]any) (*acc.Options, error) {
	o, err := acc.NewOptions(kind)
	if err != nil {
		return nil, err
	}
	for k, v := range kv {
		switch v := v.(type) {
		case int64:
			err = o.SetInt(k, v)
		case int:
			err = o.SetInt(k, int64(v))
		case float64:
			err = o.SetFloat(k, v)
		case bool:
			err = o.SetBool(k, v)
		case string:
			err = o.SetString(k, v)
		default:
			err = fmt.Errorf("option %s: unsupported value type %T", k, v)
		}
		if err != nil {
			o.Close()
			return nil, err
		}
	}
	return o, nil
}

func loadSplit(dir, split string, limit int64) (*acc.Dataset, error) {
	ds, err := acc.DatasetFromIDX(dir+"/"+split+"-images-idx3-ubyte.gz", dir+"/"+split+"-labels-idx1-ubyte.gz")
	if err != nil {
		return nil, err
	}
	if size := ds.Size(); limit <= 0 || limit >= size {
		return ds, nil
	}
	defer ds.Close()
	return ds.Subset(0, limit)
}

// sumAcrossProcesses sums values over the job's processes (a no-op on one process).
func sumAcrossProcesses(a *acc.Accelerator, values ...float64) ([]float64, error) {
	local, err := acc.FromFloat64s(values, int64(len(values)))
	if err != nil {
		return nil, err
	}
	defer local.Close()
	total, err := a.Reduce(local, acc.ReductionSum, "sum_across_processes")
	if err != nil {
		return nil, err
	}
	defer total.Close()
	return total.Float64s()
}
