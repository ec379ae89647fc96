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

func (a *Accelerator) Device() string {
	return value(a.ref(), func(h capi.Accelerator, e *string) string { return h.Device(e) })
}
func (a *Accelerator) DistributedType() string {
	return value(a.ref(), func(h capi.Accelerator, e *string) string { return h.DistributedType(e) })
}
func (a *Accelerator) MixedPrecision() string {
	return value(a.ref(), func(h capi.Accelerator, e *string) string { return h.MixedPrecision(e) })
}
func (a *Accelerator) ProcessIndex() int64 {
	return value(a.ref(), func(h capi.Accelerator, e *string) int64 { return h.ProcessIndex(e) })
}
func (a *Accelerator) NumProcesses() int64 {
	return value(a.ref(), func(h capi.Accelerator, e *string) int64 { return h.NumProcesses(e) })
}
func (a *Accelerator) LocalProcessIndex() int64 {
	return value(a.ref(), func(h capi.Accelerator, e *string) int64 { return h.LocalProcessIndex(e) })
}
func (a *Accelerator) IsMainProcess() bool {
	return value(a.ref(), func(h capi.Accelerator, e *string) bool { return h.IsMainProcess(e) })
}
func (a *Accelerator) IsLocalMainProcess() bool {
	return value(a.ref(), func(h capi.Accelerator, e *string) bool { return h.IsLocalMainProcess(e) })
}
func (a *Accelerator) IsLastProcess() bool {
	return value(a.ref(), func(h capi.Accelerator, e *string) bool { return h.IsLastProcess(e) })
}
func (a *Accelerator) GradientAccumulationSteps() int64 {
	return value(a.ref(), func(h capi.Accelerator, e *string) int64 { return h.GradientAccumulationSteps(e) })
}
func (a *Accelerator) SyncGradients() bool {
	return value(a.ref(), func(h capi.Accelerator, e *string) bool { return h.SyncGradients(e) })
}
func (a *Accelerator) OptimizerStepWasSkipped() bool {
	return value(a.ref(), func(h capi.Accelerator, e *string) bool { return h.OptimizerStepWasSkipped(e) })
}
func (a *Accelerator) Step() int64 {
	return value(a.ref(), func(h capi.Accelerator, e *string) int64 { return h.Step(e) })
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

// BackwardWith is Accelerate's backward(loss, retain_graph=..., create_graph=...): retainGraph keeps
// the graph for another backward through it; createGraph gives gradients a graph of their own (and
// keeps the graph).
func (a *Accelerator) BackwardWith(loss *Tensor, retainGraph, createGraph bool) error {
	lh, err := loss.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(loss)
	return a.do(func(h capi.Accelerator, e *string) { h.BackwardWith(lh, retainGraph, createGraph, e) })
}

// LomoBackward is Accelerate's lomo_backward: the prepared LOMO optimizer ("lomo", "adalomo")
// updates each parameter inside backward, at learningRate.
func (a *Accelerator) LomoBackward(loss *Tensor, learningRate float64) error {
	lh, err := loss.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(loss)
	return a.do(func(h capi.Accelerator, e *string) { h.LomoBackward(lh, learningRate, e) })
}

// BackwardLR is Accelerate's backward(loss, learning_rate=...): the loss over the accumulation
// steps, then LomoBackward.
func (a *Accelerator) BackwardLR(loss *Tensor, learningRate float64) error {
	lh, err := loss.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(loss)
	return a.do(func(h capi.Accelerator, e *string) { h.BackwardLr(lh, learningRate, e) })
}

// LomoGradNorm is the LOMO optimizer's grad_norm pass for its clip_grad_norm, before LomoBackward
// on the same loss: it returns the gradients' total norm.
func (a *Accelerator) LomoGradNorm(loss *Tensor) (float64, error) {
	lh, err := loss.ref().get()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(loss)
	return with(a.ref(), func(h capi.Accelerator, e *string) float64 { return h.LomoGradNorm(lh, e) })
}

// Accumulate runs f as one micro-step of gradient accumulation (Accelerate's
// `with accelerator.accumulate(model):`); the micro-step ends when f returns, a panic included.
// Returns f's error, else ending's.
//
//	err := a.Accumulate(func() error { ...; return a.Backward(loss) })
func (a *Accelerator) Accumulate(f func() error) error {
	return a.section(f, capi.Accelerator.AccumulateBegin, capi.Accelerator.AccumulateEnd)
}

// NoSync runs f with gradients accumulating locally, without the allreduce.
func (a *Accelerator) NoSync(m *Model, f func() error) error {
	return a.modelSection(m, f, capi.Accelerator.NoSyncBegin, capi.Accelerator.NoSyncEnd)
}

// LocalSGD is Accelerate's LocalSGD: f trains with each process stepping on its own gradients and
// calls step after each optimizer step, which averages the parameters over the processes every
// localSGDSteps calls; they are averaged once more when f returns (a panic included). Returns f's
// error, else ending's.
//
//	err := a.LocalSGD(m, 8, true, func(step func() error) error { ...; return step() })
func (a *Accelerator) LocalSGD(m *Model, localSGDSteps int64, enabled bool, f func(step func() error) error) error {
	mh, err := m.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(m)
	step := func() error { return a.do(func(h capi.Accelerator, e *string) { h.LocalSgdStep(mh, e) }) }
	begin := func(h capi.Accelerator, mh capi.Model, e *string) { h.LocalSgdBegin(mh, localSGDSteps, enabled, e) }
	return a.modelSection(m, func() error { return f(step) }, begin, capi.Accelerator.LocalSgdEnd)
}

// Profile is Accelerate's accelerator.profile(): torch's profiler records the operators f runs, and
// f calls step for the profiler's schedule (prof.step()). When f returns (a panic included) the
// profiler stops and, with output_trace_dir, every process writes its Chrome trace
// output_trace_dir/profile_<process index>.json and waits for the others; ProfileSummary is then the
// operators' table. opts: ProfileOptions or nil. torch's profiler records one OS thread, so f runs
// locked to the calling goroutine's thread: do the work to profile in f itself, not in other
// goroutines. Returns f's error, else ending's.
//
//	err := a.Profile(opts, func(step func() error) error { ...; return step() })
func (a *Accelerator) Profile(opts *Options, f func(step func() error) error) error {
	oh, err := opts.handleOf()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(opts)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	step := func() error { return a.do(func(h capi.Accelerator, e *string) { h.ProfileStep(e) }) }
	begin := func(h capi.Accelerator, e *string) { h.ProfileBegin(oh, e) }
	return a.section(func() error { return f(step) }, begin, capi.Accelerator.ProfileEnd)
}

// ProfileSummary is the last recorded cycle's table (after the profile, or in an OnTraceReady
// handler), as torch's key_averages().table(): per operator its calls, self and total CPU time
// (and FLOPs when recorded), sorted by self time.
func (a *Accelerator) ProfileSummary() (string, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) string { return h.ProfileSummary(e) })
}

// ExportChromeTrace writes the last recorded cycle's Chrome trace to path (this process alone):
// after the profile, or in an OnTraceReady handler.
func (a *Accelerator) ExportChromeTrace(path string) error {
	return a.do(func(h capi.Accelerator, e *string) { h.ExportChromeTrace(path, e) })
}

// EvenBatches is what JoinUnevenInputs does to the even_batches of the prepared map-style loaders.
type EvenBatches int

const (
	KeepEvenBatches EvenBatches = -1 // as they were prepared
	EvenBatchesOff  EvenBatches = 0  // off until the end
	EvenBatchesOn   EvenBatches = 1  // on until the end
)

// JoinUnevenInputs is Accelerate's join_uneven_inputs: processes may run different numbers of
// training steps of m inside f; when f returns on a process whose data has ended, that process joins
// the others until all have ended, then every replica takes the weights of one that trained to the end.
func (a *Accelerator) JoinUnevenInputs(m *Model, even EvenBatches, f func() error) error {
	begin := func(h capi.Accelerator, mh capi.Model, e *string) { h.JoinUnevenInputsBegin(mh, int(even), e) }
	return a.modelSection(m, f, begin, capi.Accelerator.JoinUnevenInputsEnd)
}

// MainProcessFirst runs f on the main process first; the others run it once it has.
func (a *Accelerator) MainProcessFirst(f func() error) error {
	return a.section(f, capi.Accelerator.MainProcessFirstBegin, capi.Accelerator.MainProcessFirstEnd)
}

// LocalMainProcessFirst runs f on each machine's main process first.
func (a *Accelerator) LocalMainProcessFirst(f func() error) error {
	return a.section(f, capi.Accelerator.LocalMainProcessFirstBegin, capi.Accelerator.LocalMainProcessFirstEnd)
}

// section runs begin, then f, then end (also when f panics); f's error first, else end's.
func (a *Accelerator) section(f func() error, begin, end func(capi.Accelerator, *string)) (err error) {
	if err := a.do(begin); err != nil {
		return err
	}
	defer func() {
		if endErr := a.do(end); err == nil {
			err = endErr
		}
	}()
	return f()
}

// modelSection is section for the sections about a model.
func (a *Accelerator) modelSection(m *Model, f func() error, begin, end func(capi.Accelerator, capi.Model, *string)) (err error) {
	mh, err := m.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(m)
	return a.section(f, func(h capi.Accelerator, e *string) { begin(h, mh, e) },
		func(h capi.Accelerator, e *string) { end(h, mh, e) })
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

// MergeShardedCheckpoint merges the model shards of a SHARDED_STATE_DICT checkpoint (zero_stage 3)
// into outputDir as SaveModel lays it out (Accelerate's merge-weights); maxShardSize "" means the
// default. It needs no accelerator.
func MergeShardedCheckpoint(checkpointDir string, modelIndex int, outputDir, maxShardSize string) error {
	_, err := call(func(e *string) struct{} {
		capi.AcceleratorMergeShardedCheckpoint(checkpointDir, int64(modelIndex), outputDir, maxShardSize, e)
		return struct{}{}
	})
	return err
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

// BroadcastObject is process src's bytes, on every process (the others' data is not read).
func (a *Accelerator) BroadcastObject(data []byte, src int64, name string) ([]byte, error) {
	items, err := byteList(with(a.ref(), func(h capi.Accelerator, e *string) capi.StringList {
		return h.BroadcastObject(data, src, name, e)
	}))
	if err != nil {
		return nil, err
	}
	return items[0], nil
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
