package accelerate

import (
	"runtime"

	"github.com/accelerate-cpp/accelerate/go/internal/capi"
)

// Placement of one prepared object.
type Placement int

const (
	PlacementDefault Placement = capi.PlacementDefault
	PlacementNo      Placement = capi.PlacementNo
	PlacementYes     Placement = capi.PlacementYes
)

// Accelerator ties a training loop to 1..N processes, devices and mixed precision.
type Accelerator struct{ r ref[capi.Accelerator] }

// NewAccelerator; opts may be nil (defaults and accelerate-launch's environment).
func NewAccelerator(opts *Options) (*Accelerator, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(opts)
	h, err := call(func(e *string) capi.Accelerator { return capi.NewAccelerator(oh, e) })
	return adopt(h, err, capi.DeleteAccelerator, func(r ref[capi.Accelerator]) *Accelerator { return &Accelerator{r} }, (*Accelerator).Close)
}
func (a *Accelerator) Close() error { return closeObject(a, a.ref()) }

func (a *Accelerator) ref() *ref[capi.Accelerator] {
	if a == nil {
		return nil
	}
	return &a.r
}

func (a *Accelerator) do(f func(h capi.Accelerator, e *string)) error {
	return do(a.ref(), f)
}

func (a *Accelerator) Device() (string, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) string { return h.Device(e) })
}
func (a *Accelerator) DistributedType() (string, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) string { return h.DistributedType(e) })
}
func (a *Accelerator) MixedPrecision() (string, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) string { return h.MixedPrecision(e) })
}
func (a *Accelerator) ProcessIndex() (int64, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) int64 { return h.ProcessIndex(e) })
}
func (a *Accelerator) NumProcesses() (int64, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) int64 { return h.NumProcesses(e) })
}
func (a *Accelerator) LocalProcessIndex() (int64, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) int64 { return h.LocalProcessIndex(e) })
}
func (a *Accelerator) IsMainProcess() (bool, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) bool { return h.IsMainProcess(e) })
}
func (a *Accelerator) IsLocalMainProcess() (bool, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) bool { return h.IsLocalMainProcess(e) })
}
func (a *Accelerator) IsLastProcess() (bool, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) bool { return h.IsLastProcess(e) })
}
func (a *Accelerator) GradientAccumulationSteps() (int64, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) int64 { return h.GradientAccumulationSteps(e) })
}
func (a *Accelerator) SyncGradients() (bool, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) bool { return h.SyncGradients(e) })
}
func (a *Accelerator) OptimizerStepWasSkipped() (bool, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) bool { return h.OptimizerStepWasSkipped(e) })
}
func (a *Accelerator) Step() (int64, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) int64 { return h.Step(e) })
}

// PrepareModel returns the prepared model (a new object; m stays the raw model).
func (a *Accelerator) PrepareModel(m *Model, p Placement) (*Model, error) {
	mh, err := m.ref().get()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(m)
	return adoptModel(with(a.ref(), func(h capi.Accelerator, e *string) capi.Model {
		return h.PrepareModel(mh, capi.Acc_placement(p), e)
	}))
}
func (a *Accelerator) PrepareOptimizer(o *Optimizer, p Placement) (*Optimizer, error) {
	oh, err := o.ref().get()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(o)
	return adoptOptimizer(with(a.ref(), func(h capi.Accelerator, e *string) capi.Optimizer {
		return h.PrepareOptimizer(oh, capi.Acc_placement(p), e)
	}))
}
func (a *Accelerator) PrepareDataLoader(l *DataLoader, p Placement) (*DataLoader, error) {
	lh, err := l.ref().get()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(l)
	return adoptDataLoader(with(a.ref(), func(h capi.Accelerator, e *string) capi.DataLoader {
		return h.PrepareDataLoader(lh, capi.Acc_placement(p), e)
	}))
}
func (a *Accelerator) PrepareScheduler(s *Scheduler) (*Scheduler, error) {
	sh, err := s.ref().get()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(s)
	return adoptScheduler(with(a.ref(), func(h capi.Accelerator, e *string) capi.Scheduler { return h.PrepareScheduler(sh, e) }))
}
func (a *Accelerator) UnwrapModel(m *Model) (*Model, error) {
	mh, err := m.ref().get()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(m)
	return adoptModel(with(a.ref(), func(h capi.Accelerator, e *string) capi.Model { return h.UnwrapModel(mh, e) }))
}

// Backward is Accelerate's backward (loss / gradient_accumulation_steps, then back-propagation).
func (a *Accelerator) Backward(loss *Tensor) error {
	lh, err := loss.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(loss)
	return a.do(func(h capi.Accelerator, e *string) { h.Backward(lh, e) })
}

// Accumulate starts a micro-step; call the returned function when it ends (defer it).
func (a *Accelerator) Accumulate() (end func() error, err error) {
	if err := a.do(func(h capi.Accelerator, e *string) { h.AccumulateBegin(e) }); err != nil {
		return nil, err
	}
	return once(func() error { return a.do(func(h capi.Accelerator, e *string) { h.AccumulateEnd(e) }) }), nil
}

// NoSync accumulates gradients locally until the returned function runs.
func (a *Accelerator) NoSync(m *Model) (end func() error, err error) {
	return a.modelScope(m, capi.Accelerator.NoSyncBegin, capi.Accelerator.NoSyncEnd)
}

// EvenBatches is what JoinUnevenInputs does to the even_batches of the prepared map-style loaders.
type EvenBatches int

const (
	KeepEvenBatches EvenBatches = -1 // as they were prepared
	EvenBatchesOff  EvenBatches = 0  // off until end
	EvenBatchesOn   EvenBatches = 1  // on until end
)

// JoinUnevenInputs is Accelerate's join_uneven_inputs: processes may run different numbers of
// training steps of m until end, which a process calls when its data has ended; end joins the others
// until all have ended, then every replica takes the weights of one that trained to the end.
func (a *Accelerator) JoinUnevenInputs(m *Model, even EvenBatches) (end func() error, err error) {
	begin := func(h capi.Accelerator, mh capi.Model, e *string) { h.JoinUnevenInputsBegin(mh, int(even), e) }
	return a.modelScope(m, begin, capi.Accelerator.JoinUnevenInputsEnd)
}

// modelScope runs begin on m now and returns end, which runs once.
func (a *Accelerator) modelScope(m *Model, begin, end func(capi.Accelerator, capi.Model, *string)) (func() error, error) {
	mh, err := m.ref().get()
	if err != nil {
		return nil, err
	}
	if err := a.do(func(h capi.Accelerator, e *string) { begin(h, mh, e) }); err != nil {
		return nil, err
	}
	return once(func() error {
		defer runtime.KeepAlive(m)
		return a.do(func(h capi.Accelerator, e *string) { end(h, mh, e) })
	}), nil
}

// MainProcessFirst: the main process runs the section first; call end when it is done.
func (a *Accelerator) MainProcessFirst() (end func() error, err error) {
	if err := a.do(func(h capi.Accelerator, e *string) { h.MainProcessFirstBegin(e) }); err != nil {
		return nil, err
	}
	return once(func() error { return a.do(func(h capi.Accelerator, e *string) { h.MainProcessFirstEnd(e) }) }), nil
}

func (a *Accelerator) LocalMainProcessFirst() (end func() error, err error) {
	if err := a.do(func(h capi.Accelerator, e *string) { h.LocalMainProcessFirstBegin(e) }); err != nil {
		return nil, err
	}
	return once(func() error { return a.do(func(h capi.Accelerator, e *string) { h.LocalMainProcessFirstEnd(e) }) }), nil
}

func once(f func() error) func() error {
	done := false
	return func() error {
		if done {
			return nil
		}
		done = true
		return f()
	}
}

func (a *Accelerator) TriggerSyncInBackward(m *Model) error {
	mh, err := m.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(m)
	return a.do(func(h capi.Accelerator, e *string) { h.TriggerSyncInBackward(mh, e) })
}

// ClipGradNorm clips the gradients' total norm to maxNorm; returns the norm before clipping.
func (a *Accelerator) ClipGradNorm(m *Model, maxNorm, normType float64) (float64, error) {
	mh, err := m.ref().get()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(m)
	return with(a.ref(), func(h capi.Accelerator, e *string) float64 { return h.ClipGradNorm(mh, maxNorm, normType, e) })
}
func (a *Accelerator) ClipGradValue(m *Model, clip float64) error {
	mh, err := m.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(m)
	return a.do(func(h capi.Accelerator, e *string) { h.ClipGradValue(mh, clip, e) })
}

// SaveModel writes the unwrapped model's weights as safetensors into dir (maxShardSize "" = 10GB).
func (a *Accelerator) SaveModel(m *Model, dir, maxShardSize string) error {
	mh, err := m.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(m)
	return a.do(func(h capi.Accelerator, e *string) { h.SaveModel(mh, dir, maxShardSize, e) })
}

// Print prints text on the main process only.
func (a *Accelerator) Print(text string) error {
	return a.do(func(h capi.Accelerator, e *string) { h.Print(text, e) })
}
func (a *Accelerator) WaitForEveryone() error {
	return a.do(func(h capi.Accelerator, e *string) { h.WaitForEveryone(e) })
}
func (a *Accelerator) FreeMemory() error {
	return a.do(func(h capi.Accelerator, e *string) { h.FreeMemory(e) })
}

func (a *Accelerator) collective(t *Tensor, f func(h capi.Accelerator, th capi.Tensor, e *string) capi.Tensor) (*Tensor, error) {
	th, err := t.ref().get()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(t)
	return wrapTensor(with(a.ref(), func(h capi.Accelerator, e *string) capi.Tensor { return f(h, th, e) }))
}

// Gather concatenates every process's tensor on dim 0 (name may be "").
func (a *Accelerator) Gather(t *Tensor, name string) (*Tensor, error) {
	return a.collective(t, func(h capi.Accelerator, th capi.Tensor, e *string) capi.Tensor { return h.Gather(th, name, e) })
}
func (a *Accelerator) GatherForMetrics(t *Tensor, name string) (*Tensor, error) {
	return a.collective(t, func(h capi.Accelerator, th capi.Tensor, e *string) capi.Tensor {
		return h.GatherForMetrics(th, name, e)
	})
}
func (a *Accelerator) Reduce(t *Tensor, op Reduction, name string) (*Tensor, error) {
	return a.collective(t, func(h capi.Accelerator, th capi.Tensor, e *string) capi.Tensor {
		return h.Reduce(th, capi.Acc_reduction(op), name, e)
	})
}
func (a *Accelerator) Broadcast(t *Tensor, src int64, name string) (*Tensor, error) {
	return a.collective(t, func(h capi.Accelerator, th capi.Tensor, e *string) capi.Tensor { return h.Broadcast(th, src, name, e) })
}
func (a *Accelerator) PadAcrossProcesses(t *Tensor, dim int64, value float64, padFirst bool, name string) (*Tensor, error) {
	return a.collective(t, func(h capi.Accelerator, th capi.Tensor, e *string) capi.Tensor {
		return h.PadAcrossProcesses(th, dim, value, padFirst, name, e)
	})
}

// GatherObject returns every process's bytes in rank order.
func (a *Accelerator) GatherObject(data []byte, name string) ([][]byte, error) {
	return byteList(with(a.ref(), func(h capi.Accelerator, e *string) capi.StringList { return h.GatherObject(data, name, e) }))
}

// SplitBetweenProcesses is this process's share [start, end) of n items, and its padding.
func (a *Accelerator) SplitBetweenProcesses(n int64, applyPadding bool) (start, end, padding int64, err error) {
	out := make([]int64, 3)
	err = a.do(func(h capi.Accelerator, e *string) { h.SplitBetweenProcesses(n, applyPadding, out, e) })
	return out[0], out[1], out[2], err
}
func (a *Accelerator) SetTrigger() error {
	return a.do(func(h capi.Accelerator, e *string) { h.SetTrigger(e) })
}
func (a *Accelerator) CheckTrigger() (bool, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) bool { return h.CheckTrigger(e) })
}

// SaveState writes a checkpoint into dir ("" = automatic naming under project_dir); returns the folder.
func (a *Accelerator) SaveState(dir string) (string, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) string { return h.SaveState(dir, e) })
}

// LoadState restores a checkpoint from dir ("" = the newest under project_dir); returns the folder.
func (a *Accelerator) LoadState(dir string) (string, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) string { return h.LoadState(dir, e) })
}
