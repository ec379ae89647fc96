package accelerate

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/accelerate-cpp/accelerate/go/internal/capi"
)

// Dataset is a map-style dataset (samples by index) or a stream.
type Dataset struct{ r ref[capi.Dataset] }

func adoptDataset(h capi.Dataset, err error) (*Dataset, error) {
	return adopt(h, err, capi.DeleteDataset, func(r ref[capi.Dataset]) *Dataset { return &Dataset{r} }, (*Dataset).Close)
}
func (d *Dataset) Close() error { return closeObject(d, d.ref()) }

func (d *Dataset) ref() *ref[capi.Dataset] {
	if d == nil {
		return nil
	}
	return &d.r
}

// DatasetFromTensors: fields sharing their first dimension (e.g. features [N, D], labels [N]).
func DatasetFromTensors(fields ...*Tensor) (*Dataset, error) {
	l, err := NewTensorList(fields...)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return adoptDataset(call(func(e *string) capi.Dataset { return capi.DatasetFromTensors(l.r.h, e) }))
}

// DatasetFromIDX: images as float32 [N,1,H,W] in [0,1], labels as int64 [N].
func DatasetFromIDX(images, labels string) (*Dataset, error) {
	return adoptDataset(call(func(e *string) capi.Dataset { return capi.DatasetFromIdx(images, labels, e) }))
}

// SampleFunc returns sample i's fields; the dataset closes them. It may run on loader goroutines'
// threads; a returned error or a panic becomes the loader's ErrIO with its message.
type SampleFunc func(index int64) ([]*Tensor, error)

// StreamFunc is an iterable dataset: Start restarts it for an epoch, Next returns the next
// sample's fields, or nil at the end.
type StreamFunc interface {
	Start(epoch int64) error
	Next() ([]*Tensor, error)
}

// DatasetFromFunc is a map-style dataset of size samples made by fn.
func DatasetFromFunc(size int64, fn SampleFunc) (*Dataset, error) {
	if fn == nil {
		return nil, nilArgument("the sample function")
	}
	src := capi.NewDirectorSampleSource(&sampleAdapter{fn})
	return adoptDataset(call(func(e *string) capi.Dataset { return capi.DatasetFromSampleSource(size, src, e) }))
}

// DatasetFromStream is an iterable dataset; sizeHint is -1 when unknown.
func DatasetFromStream(fn StreamFunc, sizeHint int64) (*Dataset, error) {
	if fn == nil {
		return nil, nilArgument("the stream")
	}
	src := capi.NewDirectorStreamSource(&streamAdapter{fn})
	return adoptDataset(call(func(e *string) capi.Dataset { return capi.DatasetFromStreamSource(src, sizeHint, e) }))
}

func (d *Dataset) Size() int64 {
	return value(d.ref(), func(h capi.Dataset, e *string) int64 { return h.Size(e) })
}
func (d *Dataset) Subset(start, count int64) (*Dataset, error) {
	return adoptDataset(with(d.ref(), func(h capi.Dataset, e *string) capi.Dataset { return h.Subset(start, count, e) }))
}
func (d *Dataset) Get(index int64) (*TensorList, error) {
	return wrapTensorList(with(d.ref(), func(h capi.Dataset, e *string) capi.TensorList { return h.Get(index, e) }))
}

// protect runs a callback's body for the library, which called it from C++: nothing may unwind
// through those frames, so a panic becomes the callback's error (code `failure`). Whether the body
// returned is tracked apart from recover's value, as panic(nil) recovers nil before Go 1.21 and
// must not pass for a success. A callback must not call runtime.Goexit (t.FailNow, t.Fatal): Go
// cannot return to C through it.
func protect(failure int, body func() int) (code int) {
	returned := false
	defer func() {
		if returned {
			return
		}
		p := recover()
		if p == nil {
			p = "panic(nil) (or runtime.Goexit, which a callback must not call)"
		}
		reportCallbackError(fmt.Sprint("panic: ", p))
		code = failure
	}()
	code = body()
	returned = true
	return code
}

func fail(err error) int {
	reportCallbackError(err.Error())
	return 1
}

// reportCallbackError hands a callback's failure to the library. A NUL, which the library's
// strings cannot hold, is written as a backslash and a zero: the wrapper would refuse the whole
// message and the caller would see none of it.
func reportCallbackError(message string) {
	capi.AccelerateCallbackSetError(strings.ReplaceAll(message, "\x00", `\0`))
}

func appendAndClose(out capi.TensorList, fields []*Tensor) int {
	defer func() {
		for _, t := range fields {
			t.Close()
		}
	}()
	for _, t := range fields {
		h, err := t.ref().get()
		if err != nil {
			return fail(err)
		}
		if err := call0(func(e *string) { out.Append("", h, e) }); err != nil {
			return fail(err)
		}
	}
	return 0
}

type sampleAdapter struct{ fn SampleFunc }

func (a *sampleAdapter) Sample(index int64, out capi.TensorList) int {
	return protect(1, func() int {
		fields, err := a.fn(index)
		if err != nil {
			return fail(err)
		}
		return appendAndClose(out, fields)
	})
}

type streamAdapter struct{ fn StreamFunc }

func (a *streamAdapter) Start(epoch int64) int {
	return protect(1, func() int {
		if err := a.fn.Start(epoch); err != nil {
			return fail(err)
		}
		return 0
	})
}

func (a *streamAdapter) Next(out capi.TensorList) int {
	return protect(1, func() int {
		fields, err := a.fn.Next()
		if err != nil {
			return fail(err)
		}
		return appendAndClose(out, fields)
	})
}

// CollateFunc makes a batch from samples (closed after the call); the loader closes the result.
type CollateFunc func(samples [][]*Tensor) ([]*Tensor, error)

type collateAdapter struct{ fn CollateFunc }

func (a *collateAdapter) Collate(view capi.Samples, out capi.TensorList) int {
	return protect(1, func() int {
		samples := make([][]*Tensor, view.Size())
		defer func() {
			for _, s := range samples {
				for _, t := range s {
					t.Close()
				}
			}
		}()
		for i := range samples {
			n, err := call(func(e *string) int64 { return view.Fields(int64(i), e) })
			if err != nil {
				return fail(err)
			}
			for j := int64(0); j < n; j++ {
				t, err := wrapTensor(call(func(e *string) capi.Tensor { return view.Get(int64(i), j, e) }))
				if err != nil {
					return fail(err)
				}
				samples[i] = append(samples[i], t)
			}
		}
		batch, err := a.fn(samples)
		if err != nil {
			return fail(err)
		}
		return appendAndClose(out, batch)
	})
}

// DataLoader gives batches of a dataset.
type DataLoader struct {
	r    ref[capi.DataLoader]
	mu   sync.Mutex
	pass *owner // the current ForEach's batch
}

func adoptDataLoader(h capi.DataLoader, err error) (*DataLoader, error) {
	return adopt(h, err, capi.DeleteDataLoader, func(r ref[capi.DataLoader]) *DataLoader { return &DataLoader{r: r} }, (*DataLoader).Close)
}

// Close releases the loader; closing again returns an ErrInvalidHandle error. A ForEach running
// over it (on another goroutine, or the one whose body calls Close) ends with ErrInvalidHandle once
// its body returns, and closes the batch it handed out then, not under the body.
func (l *DataLoader) Close() error {
	return closeObject(l, l.ref())
}

func (l *DataLoader) ref() *ref[capi.DataLoader] {
	if l == nil {
		return nil
	}
	return &l.r
}

// NewDataLoader; opts may be nil (batch size 1, in order).
func NewDataLoader(ds *Dataset, opts *Options) (*DataLoader, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(opts)
	return adoptDataLoader(with(ds.ref(), func(h capi.Dataset, e *string) capi.DataLoader { return capi.NewDataLoader(h, oh, e) }))
}

// DataLoaderFromBatches is a loader over a batch sampler's batches (Accelerate's batch_sampler):
// batch k holds the dataset indices batches[k], yielded in this order every epoch; sizes may vary.
// opts may be nil; batch_size, shuffle and drop_last are refused (the batches decide them).
func DataLoaderFromBatches(ds *Dataset, batches [][]int64, opts *Options) (*DataLoader, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(opts)
	var indices []int64
	sizes := make([]int64, len(batches))
	for k, b := range batches {
		sizes[k] = int64(len(b))
		indices = append(indices, b...)
	}
	return adoptDataLoader(with(ds.ref(), func(h capi.Dataset, e *string) capi.DataLoader {
		return capi.DataLoaderFromBatchArrays(h, indices, sizes, oh, e)
	}))
}

// Next is the next batch, or nil at the end of the epoch (the call after that starts the next).
func (l *DataLoader) Next() (*TensorList, error) {
	return wrapTensorList(with(l.ref(), func(h capi.DataLoader, e *string) capi.TensorList { return h.Next(e) }))
}
func (l *DataLoader) Len() int64 {
	return value(l.ref(), func(h capi.DataLoader, e *string) int64 { return h.Length(e) })
}
func (l *DataLoader) Epoch() int64 {
	return value(l.ref(), func(h capi.DataLoader, e *string) int64 { return h.Epoch(e) })
}
func (l *DataLoader) SetEpoch(epoch int64) error {
	return do(l.ref(), func(h capi.DataLoader, e *string) { h.SetEpoch(epoch, e) })
}
func (l *DataLoader) SkipFirstBatches(n int64) error {
	return do(l.ref(), func(h capi.DataLoader, e *string) { h.SkipFirstBatches(n, e) })
}
func (l *DataLoader) TotalBatchSize() int64 {
	return value(l.ref(), func(h capi.DataLoader, e *string) int64 { return h.TotalBatchSize(e) })
}
func (l *DataLoader) TotalDatasetLength() int64 {
	return value(l.ref(), func(h capi.DataLoader, e *string) int64 { return h.TotalDatasetLength(e) })
}

// EndEpoch ends the epoch being iterated before its last batch (a loop left early), as a dropped
// Python iterator does: the next Next starts the following epoch, and a prepared loader's
// accelerator learns that its data ended. Between epochs it only drops an iterator Iter made.
func (l *DataLoader) EndEpoch() error {
	return do(l.ref(), func(h capi.DataLoader, e *string) { h.EndEpoch(e) })
}

// Iter does what creating a Python iterator over the loader (iter(loader)) does before its first
// batch: a loader not prepared takes its iterator's draw from torch's global generator now, so that
// loaders read in step by hand-driven Next calls draw as Python's zip (call Iter on each first).
// Only between epochs.
func (l *DataLoader) Iter() error {
	return do(l.ref(), func(h capi.DataLoader, e *string) { h.Iter(e) })
}

// InEpoch reports whether an epoch has begun and not ended.
func (l *DataLoader) InEpoch() bool {
	return value(l.ref(), func(h capi.DataLoader, e *string) bool { return h.InEpoch(e) })
}

// EndOfEpoch reports whether the batch last returned was its epoch's last. A stream under a loader
// that is not prepared reads its next batch to answer.
func (l *DataLoader) EndOfEpoch() bool {
	return value(l.ref(), func(h capi.DataLoader, e *string) bool { return h.EndOfEpoch(e) })
}

// SetCollate makes batches with fn instead of stacking samples.
func (l *DataLoader) SetCollate(fn CollateFunc) error {
	if fn == nil {
		return nilArgument("the collate function")
	}
	return do(l.ref(), func(h capi.DataLoader, e *string) {
		h.SetCollator(capi.NewDirectorCollator(&collateAdapter{fn}), e)
	})
}
