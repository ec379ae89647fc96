package accelerate_test

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

func TestErrorsCarryStatusAndMessage(t *testing.T) {
	o, err := acc.NewOptions(acc.OptimizerOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	err = o.SetInt("no_such_key", 1)
	var e *acc.Error
	if !errors.As(err, &e) || e.Status != acc.StatusInvalidArgument || !strings.Contains(e.Message, "no_such_key") {
		t.Fatalf("got %v", err)
	}
	if !errors.Is(err, acc.ErrInvalidArgument) || errors.Is(err, acc.ErrIO) {
		t.Fatalf("errors.Is does not match the status: %v", err)
	}
	if _, err := acc.TensorFromIDXFile("/nonexistent/x.idx"); !errors.Is(err, acc.ErrIO) || !strings.Contains(err.Error(), "/nonexistent/x.idx") {
		t.Fatalf("got %v", err)
	}
	// A negative offset is refused by its own value, not mapped as 2^64 - 1 (found by a hunt).
	if _, err := acc.TensorFromFileMmap("/nonexistent/x.bin", -1, acc.Float32, -1); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "offset is negative: -1") {
		t.Fatalf("a negative offset: %v", err)
	}
	// So is a negative index (it reached the library as a number near 2^64).
	list, err := acc.NewTensorList()
	if err != nil {
		t.Fatal(err)
	}
	defer list.Close()
	if _, err := list.Get(-1); !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "index is negative: -1") {
		t.Fatalf("a negative index: %v", err)
	}
	if _, err := list.Name(-2); !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "index is negative: -2") {
		t.Fatalf("a negative index: %v", err)
	}
	if _, err := acc.FromFloat32s(make([]float32, 5), 2, 3); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("got %v", err)
	}
	// A NUL would cut the string short in the C API: refused, not read as "no_such" or "lr".
	if err := o.SetFloat("lr\x00ignored", 0.1); !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("a key holding a NUL: %v", err)
	}
	if err := o.SetFloat("lr", 0.1); err != nil {
		t.Fatalf("the refusal stays with its call: %v", err)
	}
	// Text outside the BMP passes both ways (here back in the message).
	if err := o.SetInt("clé 😀", 1); err == nil || !strings.Contains(err.Error(), "clé 😀") {
		t.Fatalf("got %v", err)
	}
	err = acc.CheckABI(999)
	if !errors.Is(err, acc.ErrVersionMismatch) || !strings.Contains(err.Error(), "999") ||
		!strings.Contains(err.Error(), strconv.Itoa(acc.ABIVersion())) {
		t.Fatalf("got %v", err)
	}
}

// F.l1_loss, F.smooth_l1_loss and F.huber_loss's values (torch 1.13).
func TestRegressionLossesGiveTorchsValues(t *testing.T) {
	x, err := acc.FromFloat32s([]float32{0.5, -1, 2, 0.1}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	y, err := acc.FromFloat32s([]float32{0, 0.5, -1, 0.1}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	for _, c := range []struct {
		name string
		loss func() (*acc.Tensor, error)
		want float64
	}{
		{"l1", func() (*acc.Tensor, error) { return acc.L1Loss(x, y, acc.ReductionMean) }, 1.25},
		{"smooth_l1", func() (*acc.Tensor, error) { return acc.SmoothL1Loss(x, y, acc.ReductionSum, 2) }, 2.625},
		{"huber", func() (*acc.Tensor, error) { return acc.HuberLoss(x, y, acc.ReductionSum, 2) }, 5.25},
	} {
		loss, err := c.loss()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, err := loss.Item(); err != nil || got != c.want {
			t.Errorf("%s: %v (%v), want %v", c.name, got, err, c.want)
		}
		loss.Close()
	}
	if _, err := acc.HuberLoss(x, y, acc.ReductionMean, 0); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("delta 0: %v", err)
	}
}

func TestCloseTwiceAndUseAfterCloseAreErrors(t *testing.T) {
	x, err := acc.FromFloat32s([]float32{1, 2}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); !errors.Is(err, acc.ErrInvalidHandle) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := x.Sum(); !errors.Is(err, acc.ErrInvalidHandle) {
		t.Fatalf("use after Close: %v", err)
	}
	y, _ := acc.FromFloat32s([]float32{1, 2}, 2)
	defer y.Close()
	if _, err := y.CountEqual(x); !errors.Is(err, acc.ErrInvalidHandle) {
		t.Fatalf("closed argument: %v", err)
	}
	m, _ := acc.ModelFromSpec(`[{"type":"linear","in_features":2,"out_features":1}]`)
	opt, err := acc.NewOptimizer(m, "sgd", nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Close() // children keep their parents alive
	if err := opt.Step(); err != nil {
		t.Fatal(err)
	}
	opt.Close()
}

// A nil object is an invalid handle, never a crash: as a receiver (Close included) or an argument.
func TestNilObjectsAreInvalidHandles(t *testing.T) {
	var m *acc.Model
	if err := m.Close(); !errors.Is(err, acc.ErrInvalidHandle) || !strings.Contains(err.Error(), "Model") {
		t.Fatalf("Close of a nil *Model: %v", err)
	}
	if _, err := m.ParameterNames(); !errors.Is(err, acc.ErrInvalidHandle) {
		t.Fatalf("method of a nil *Model: %v", err)
	}
	if _, err := acc.NewOptimizer(nil, "sgd", nil); !errors.Is(err, acc.ErrInvalidHandle) {
		t.Fatalf("nil *Model argument: %v", err)
	}
	var x *acc.Tensor
	if err := x.Close(); !errors.Is(err, acc.ErrInvalidHandle) {
		t.Fatalf("Close of a nil *Tensor: %v", err)
	}
	y, err := acc.FromFloat32s([]float32{1, 2}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if _, err := y.CountEqual(nil); !errors.Is(err, acc.ErrInvalidHandle) {
		t.Fatalf("nil *Tensor argument: %v", err)
	}
	real, err := acc.ModelFromSpec(`[{"type":"linear","in_features":2,"out_features":1}]`)
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	if _, err := real.Forward(nil); !errors.Is(err, acc.ErrInvalidHandle) {
		t.Fatalf("nil *Tensor argument to Forward: %v", err)
	}
	var l *acc.TensorList
	if err := l.Close(); !errors.Is(err, acc.ErrInvalidHandle) {
		t.Fatalf("Close of a nil *TensorList: %v", err)
	}
}

func rssKB(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			v, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return v
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// settledLiveHandles counts live handles once earlier tests' unclosed objects are finalized (their
// finalizers run on the collector's schedule, so a count taken at once would move under a test).
func settledLiveHandles() int64 {
	last, steady := acc.LiveHandles(acc.HandleAny), 0
	for i := 0; i < 200 && steady < 3; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
		if now := acc.LiveHandles(acc.HandleAny); now == last {
			steady++
		} else {
			last, steady = now, 0
		}
	}
	return last
}

func TestLeak100000Tensors(t *testing.T) {
	data := make([]float32, 256)
	baseline := settledLiveHandles()
	for i := 0; i < 1000; i++ {
		x, _ := acc.FromFloat32s(data, 256)
		x.Close()
	}
	before := rssKB(t)
	for i := 0; i < 100000; i++ {
		x, err := acc.FromFloat32s(data, 256)
		if err != nil {
			t.Fatal(err)
		}
		x.Close()
	}
	if got := acc.LiveHandles(acc.HandleAny); got != baseline {
		t.Fatalf("live handles %d, baseline %d", got, baseline)
	}
	growth := rssKB(t) - before
	t.Logf("RSS growth after 100000 closed tensors: %d KiB", growth)
	if growth > 64*1024 {
		t.Fatalf("RSS grew by %d KiB", growth)
	}
	// The finalizer backstop frees what is never closed.
	for i := 0; i < 10000; i++ {
		acc.FromFloat32s(data[:1], 1)
	}
	for i := 0; i < 100 && acc.LiveHandles(acc.HandleAny) != baseline; i++ {
		runtime.GC()
	}
	if got := acc.LiveHandles(acc.HandleAny); got != baseline {
		t.Fatalf("after GC: live handles %d, baseline %d", got, baseline)
	}
}

func sample(i int64) ([]*acc.Tensor, error) {
	x, err := acc.FromFloat32s([]float32{float32(i), float32(2 * i)}, 2)
	if err != nil {
		return nil, err
	}
	y, err := acc.FromInt64s([]int64{i % 3})
	return []*acc.Tensor{x, y}, err
}

func TestCallbacks(t *testing.T) {
	baseline := settledLiveHandles()
	ds, err := acc.DatasetFromFunc(10, sample)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := acc.NewOptions(acc.DataLoaderOptions)
	o.SetInt("batch_size", 4)
	o.SetInt("num_workers", 2)
	dl, err := acc.NewDataLoader(ds, o)
	if err != nil {
		t.Fatal(err)
	}
	var firsts []float32
	for {
		b, err := dl.Next()
		if err != nil {
			t.Fatal(err)
		}
		if b == nil {
			break
		}
		x, _ := b.Get(0)
		v, _ := x.Float32s()
		for i := 0; i < len(v); i += 2 {
			firsts = append(firsts, v[i])
		}
		x.Close()
		b.Close()
	}
	if len(firsts) != 10 || firsts[9] != 9 {
		t.Fatalf("samples %v", firsts)
	}
	dl.Close()
	ds.Close()
	o.Close()
	if got := acc.LiveHandles(acc.HandleAny); got != baseline {
		t.Fatalf("live handles %d, baseline %d", got, baseline)
	}

	// A panic and an error in callbacks become ErrIO with their message; nothing unwinds into C++.
	for _, fn := range []acc.SampleFunc{
		func(i int64) ([]*acc.Tensor, error) { panic("no sample today") },
		func(i int64) ([]*acc.Tensor, error) { panic(nil) },
		func(i int64) ([]*acc.Tensor, error) { return nil, errors.New("no sample today") },
	} {
		ds, _ := acc.DatasetFromFunc(4, fn)
		o, _ := acc.NewOptions(acc.DataLoaderOptions)
		o.SetInt("num_workers", 0)
		dl, _ := acc.NewDataLoader(ds, o)
		if _, err := dl.Next(); !errors.Is(err, acc.ErrIO) ||
			!(strings.Contains(err.Error(), "no sample today") || strings.Contains(err.Error(), "panic(nil)")) {
			t.Fatalf("got %v", err)
		}
		dl.Close()
		ds.Close()
		o.Close()
	}
}

// A NUL, which the library's strings cannot hold, is written out instead of losing the message.
func TestCallbackErrorHoldingANul(t *testing.T) {
	for _, workers := range []int64{0, 2} {
		ds, _ := acc.DatasetFromFunc(4, func(i int64) ([]*acc.Tensor, error) {
			return nil, errors.New("record\x00corrupt")
		})
		o, _ := acc.NewOptions(acc.DataLoaderOptions)
		o.SetInt("num_workers", workers)
		dl, _ := acc.NewDataLoader(ds, o)
		if _, err := dl.Next(); !errors.Is(err, acc.ErrIO) || !strings.Contains(err.Error(), `record\0corrupt`) {
			t.Fatalf("%d workers: got %v", workers, err)
		}
		dl.Close()
		ds.Close()
		o.Close()
	}
}

type countdown struct{ next, starts int64 }

func (c *countdown) Start(epoch int64) error { c.next = 0; c.starts++; return nil }
func (c *countdown) Next() ([]*acc.Tensor, error) {
	if c.next == 5 {
		return nil, nil
	}
	c.next++
	return sample(c.next)
}

func TestStreamAndCollate(t *testing.T) {
	src := &countdown{}
	ds, err := acc.DatasetFromStream(src, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	o, _ := acc.NewOptions(acc.DataLoaderOptions)
	defer o.Close()
	o.SetInt("batch_size", 5)
	dl, _ := acc.NewDataLoader(ds, o)
	defer dl.Close()
	if err := dl.SetCollate(func(samples [][]*acc.Tensor) ([]*acc.Tensor, error) {
		n, err := acc.FromFloat32s([]float32{float32(len(samples))}, 1)
		return []*acc.Tensor{n}, err
	}); err != nil {
		t.Fatal(err)
	}
	b, err := dl.Next()
	if err != nil || b == nil {
		t.Fatal(err)
	}
	defer b.Close()
	x, _ := b.Get(0)
	defer x.Close()
	if v, _ := x.Float32s(); len(v) != 1 || v[0] != 5 || src.starts != 1 {
		t.Fatalf("batch %v, starts %d", v, src.starts)
	}
}

func TestUnevenSamplesFailCollationWithTheLibrarysMessage(t *testing.T) {
	ds, err := acc.DatasetFromFunc(4, func(i int64) ([]*acc.Tensor, error) {
		x, err := acc.FromFloat32s([]float32{float32(i)}, 1)
		if err != nil || i == 1 {
			return []*acc.Tensor{x}, err
		}
		y, err := acc.FromInt64s([]int64{i}, 1)
		return []*acc.Tensor{x, y}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	o, _ := acc.NewOptions(acc.DataLoaderOptions)
	defer o.Close()
	o.SetInt("batch_size", 2)
	dl, err := acc.NewDataLoader(ds, o)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	if err := dl.SetCollate(func(samples [][]*acc.Tensor) ([]*acc.Tensor, error) {
		return nil, errors.New("collate ran on uneven samples")
	}); err != nil {
		t.Fatal(err)
	}
	if b, err := dl.Next(); err == nil || !strings.Contains(err.Error(), "sample 1 has 1 fields but sample 0 has 2") {
		b.Close()
		t.Fatalf("got %v", err)
	}
}
