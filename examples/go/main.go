// Command fashion_mnist is examples/c/fashion_mnist.c through the Go binding: a small CNN trained
// on Fashion-MNIST with Accelerate's conversion (create an accelerator, prepare, backward).
//
//	PKG_CONFIG_PATH=build/pkgconfig go run . [-epochs N] [-batch-size N] [-lr X] [-train-samples N]
//	    [-test-samples N] [-data DIR] [-save FILE.pt] [-min-accuracy PCT]
//
// Exits 3 when the test accuracy is below -min-accuracy, 2 on a bad command line (before anything is
// trained: a -save path whose folder is missing too), 1 on an error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

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
	parseFlags()
	// The C example's rules (examples/c/fashion_mnist.c), checked before anything is loaded or trained.
	switch {
	case flag.NArg() > 0: // Go's flag package stops at the first one: the flags after it would be lost
		usageError("unexpected argument %q (flags come first: -name value)", flag.Arg(0))
	case c.epochs < 1 || c.epochs > math.MaxInt32:
		usageError("-epochs must be from 1 to %d, got %d", math.MaxInt32, c.epochs)
	case c.batchSize < 1 || c.batchSize > math.MaxInt32:
		usageError("-batch-size must be from 1 to %d, got %d", math.MaxInt32, c.batchSize)
	case c.trainSamples < 0:
		usageError("-train-samples must be from 0 to %d, got %d", int64(math.MaxInt64), c.trainSamples)
	case c.testSamples < 0:
		usageError("-test-samples must be from 0 to %d, got %d", int64(math.MaxInt64), c.testSamples)
	case math.IsNaN(c.lr) || math.IsInf(c.lr, 0):
		usageError("-lr must be a finite number, got %v", c.lr)
	case math.IsNaN(c.minAccuracy) || math.IsInf(c.minAccuracy, 0):
		usageError("-min-accuracy must be a finite number, got %v", c.minAccuracy)
	}
	// The model is saved after training: a path that cannot take the file is refused now, not then.
	if err := checkSavePath(c.save); err != nil {
		usageError("%v", err)
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

// parseFlags parses the command line as flag.Parse does (a bad value: the error and the flags on
// stderr, exit 2), except that -h and -help print the flags on stdout and exit 0.
func parseFlags() {
	flag.CommandLine.Init(os.Args[0], flag.ContinueOnError)
	flag.CommandLine.SetOutput(io.Discard)
	err := flag.CommandLine.Parse(os.Args[1:])
	if err == flag.ErrHelp {
		flag.CommandLine.SetOutput(os.Stdout)
		flag.Usage()
		os.Exit(0)
	}
	flag.CommandLine.SetOutput(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		flag.Usage()
		os.Exit(2)
	}
}

// usageError reports a bad command line in one line on stderr and exits 2.
func usageError(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", filepath.Base(os.Args[0]), fmt.Sprintf(format, args...))
	os.Exit(2)
}

// checkSavePath refuses a -save path that the TorchScript file could not be written to: an
// existing folder, or a file whose folder does not exist or is not a folder. It creates nothing.
func checkSavePath(path string) error {
	if path == "" { // no file
		return nil
	}
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		return fmt.Errorf("-save %s is a folder; give a file name", path)
	}
	if strings.HasSuffix(path, "/") {
		return fmt.Errorf("-save %s ends with '/'; give a file name", path)
	}
	// The folder as written (not cleaned: "missing/../model.pt" needs missing/ to exist).
	dir := "."
	if i := strings.LastIndex(path, "/"); i == 0 {
		dir = "/"
	} else if i > 0 {
		dir = path[:i]
	}
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("-save %s: the folder %s does not exist", path, dir)
	case err != nil:
		reason := err.Error()
		if e, ok := err.(*fs.PathError); ok {
			reason = e.Err.Error()
		}
		return fmt.Errorf("-save %s: the folder %s: %s", path, dir, reason)
	case !info.IsDir():
		return fmt.Errorf("-save %s: %s is not a folder", path, dir)
	}
	return nil
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
