// Package golden runs bindings/golden/golden.c's scenario through the Go binding and prints the
// bits of every number the same way, so the outputs can be compared byte for byte.
package golden

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

const (
	n, d, classes, epochs, stepsBeforeSave = 64, 8, 3, 2, 2
	spec                                   = `[{"type":"linear","in_features":8,"out_features":16},{"type":"relu"},` +
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

// stepCounter is the registered custom state: the step counter that numbers the lines, as 8
// little-endian bytes (as golden.c writes it).
type stepCounter struct{ steps int64 }

func (c *stepCounter) Save() ([]byte, error) {
	return binary.LittleEndian.AppendUint64(nil, uint64(c.steps)), nil
}

func (c *stepCounter) Load(state []byte) error {
	if len(state) != 8 {
		return errors.New("the step counter's state is not 8 bytes")
	}
	c.steps = int64(binary.LittleEndian.Uint64(state))
	return nil
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

// objects are the model, optimizer, scheduler and loader, prepared; made the same way for the first
// run and for the resumed one. close releases them and their raw handles.
type objects struct {
	model *acc.Model
	opt   *acc.Optimizer
	sched *acc.Scheduler
	dl    *acc.DataLoader
	close func()
}

func newObjects(a *acc.Accelerator, ds *acc.Dataset) *objects {
	lo := options(acc.DataLoaderOptions, func(o *acc.Options) {
		check(o.SetInt("batch_size", 8))
		check(o.SetBool("shuffle", true))
		check(o.SetInt("seed", 7))
	})
	defer lo.Close()
	oo := options(acc.OptimizerOptions, func(o *acc.Options) { check(o.SetFloat("lr", 0.01)) })
	defer oo.Close()
	so := options(acc.SchedulerOptions, func(o *acc.Options) {
		check(o.SetInt("num_warmup_steps", 2))
		check(o.SetInt("num_training_steps", 32))
	})
	defer so.Close()
	rawLoader := must(acc.NewDataLoader(ds, lo))
	rawModel := must(acc.ModelFromSpec(spec))
	rawOpt := must(acc.NewOptimizer(rawModel, "adamw", oo))
	rawSched := must(acc.NewScheduler(rawOpt, "linear", so))
	o := &objects{
		model: must(a.PrepareModel(rawModel, acc.PlacementDefault)),
		opt:   must(a.PrepareOptimizer(rawOpt, acc.PlacementDefault)),
		dl:    must(a.PrepareDataLoader(rawLoader, acc.PlacementDefault)),
	}
	o.sched = must(a.PrepareScheduler(rawSched))
	o.close = func() {
		for _, c := range []interface{ Close() error }{o.sched, o.dl, o.opt, o.model, rawSched, rawOpt, rawModel, rawLoader} {
			check(c.Close())
		}
	}
	return o
}

// train runs up to maxBatches steps (-1: to the end of the epoch), printing each one.
func train(out *strings.Builder, a *acc.Accelerator, o *objects, counter *stepCounter, maxBatches int) {
	for done := 0; maxBatches < 0 || done < maxBatches; done++ {
		batch := must(o.dl.Next())
		if batch == nil {
			return
		}
		bx, by := must(batch.Get(0)), must(batch.Get(1))
		var logits, loss *acc.Tensor
		check(a.Accumulate(func() error {
			logits = must(o.model.Forward(bx))
			loss = must(acc.CrossEntropy(logits, by, acc.ReductionMean, 0))
			check(a.Backward(loss))
			check(o.opt.Step())
			check(o.sched.Step())
			return o.opt.ZeroGrad()
		}))
		s := counter.steps
		fmt.Fprintf(out, "loss %d %016x\n", s, math.Float64bits(must(loss.Item())))
		all := must(a.Gather(loss, "loss"))
		putFloats(out, fmt.Sprintf("gather %d", s), all)
		total := must(a.Reduce(logits, acc.ReductionSum, "logits"))
		putFloats(out, fmt.Sprintf("reduce %d", s), total)
		counter.steps++
		for _, t := range []*acc.Tensor{bx, by, logits, loss, all, total} {
			check(t.Close())
		}
		check(batch.Close())
	}
}

func putParams(out *strings.Builder, model *acc.Model) {
	for _, name := range must(model.ParameterNames()) {
		p := must(model.Parameter(name))
		putFloats(out, "param "+name, p)
		check(p.Close())
	}
}

// finishEpoch: the rest of the epoch after the checkpoint and the weights it ends with.
func finishEpoch(a *acc.Accelerator, o *objects, counter *stepCounter) string {
	var text strings.Builder
	train(&text, a, o, counter, -1)
	putParams(&text, o.model)
	return text.String()
}

// Run writes <prefix>.rank<N> and returns its path; the checkpoint goes to <prefix>.ckpt (the same
// folder on every rank). Failures panic inside and come back as the error (it is a test fixture).
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
	ckpt := prefix + ".ckpt"
	ao := options(acc.AcceleratorOptions, func(o *acc.Options) { check(o.SetBool("cpu", true)); check(o.SetInt("seed", 1234)) })
	defer ao.Close()
	a := must(acc.NewAccelerator(ao))
	defer a.Close()
	rank := a.ProcessIndex()
	counter := &stepCounter{}
	check(a.RegisterForCheckpointing(counter))
	xt := must(acc.FromFloat32s(x, n, d))
	defer xt.Close()
	yt := must(acc.FromInt64s(y, n))
	defer yt.Close()
	ds := must(acc.DatasetFromTensors(xt, yt))
	defer ds.Close()

	var out strings.Builder
	first := newObjects(a, ds)
	for epoch := 0; epoch < epochs; epoch++ {
		train(&out, a, first, counter, -1)
	}
	putParams(&out, first.model)
	// A checkpoint in the middle of the next epoch, then the rest of that epoch twice: uninterrupted,
	// and on fresh objects (from a scrambled RNG) restored from the checkpoint.
	train(&out, a, first, counter, stepsBeforeSave)
	must(a.SaveState(ckpt))
	fmt.Fprintf(&out, "saved at step %d\n", counter.steps)
	// The registered state's file in hex: every language must write the same bytes.
	fmt.Fprintf(&out, "custom_checkpoint_0.bin %x\n", must(os.ReadFile(filepath.Join(ckpt, "custom_checkpoint_0.bin"))))
	continued := finishEpoch(a, first, counter)
	out.WriteString("continued\n" + continued)
	check(a.FreeMemory())
	first.close()

	check(acc.SetSeed(98765))
	counter.steps = -1
	resumed := newObjects(a, ds)
	defer resumed.close()
	must(a.LoadState(ckpt))
	fmt.Fprintf(&out, "resumed at step %d\n", counter.steps)
	resumedText := finishEpoch(a, resumed, counter)
	out.WriteString("resumed\n" + resumedText)

	path = fmt.Sprintf("%s.rank%d", prefix, rank)
	if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
		return path, err
	}
	if continued != resumedText {
		return path, fmt.Errorf("rank %d: the resumed run differs from the uninterrupted one (see %s)", rank, path)
	}
	return path, nil
}
