package accelerate

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/accelerate-cpp/accelerate/go/internal/capi"
)

// CheckpointState is an object whose bytes go into checkpoints (RegisterForCheckpointing): Save is
// called by SaveState, Load with the same bytes by LoadState on every process. An error or a panic
// fails the save or load with its message (ErrIO).
type CheckpointState interface {
	Save() ([]byte, error)
	Load(state []byte) error
}

// TrackerFuncs is a tracker of the program (AddTracker), called on the main process only; nil
// functions are skipped. An error or a panic fails the call that triggered it (ErrIO).
type TrackerFuncs struct {
	Init   func(project, configJSON string) error
	Log    func(values map[string]float64, step int64) error
	Finish func() error
	// LogText takes the texts of Accelerator.LogText (nil: the tracker leaves them).
	LogText func(texts map[string]string, step int64) error
	// LogImages takes the images of Accelerator.LogImages, each a PNG file's bytes (nil: the tracker
	// leaves them, and none are encoded for it).
	LogImages func(images map[string][]byte, step int64) error
	// LogHistogram takes the histograms of Accelerator.LogHistogram (nil: the tracker leaves them,
	// and none is computed for it).
	LogHistogram func(name string, histogram Histogram, step int64) error
}

// Histogram is a histogram of Accelerator.LogHistogram as a tracker receives it (TensorBoard's
// HistogramProto, computed as torch's add_histogram computes it): the values' minimum, maximum,
// count, sum and sum of squares, and its buckets, bucket i holding BucketCounts[i] values above
// BucketLimits[i-1] up to BucketLimits[i] (the first bucket, empty, ends where the values begin).
type Histogram struct {
	Min, Max, Num, Sum, SumSquares float64
	BucketLimits, BucketCounts     []float64
}

func (a *Accelerator) RegisterForCheckpointing(s CheckpointState) error {
	if s == nil {
		return nilArgument("the checkpoint state")
	}
	// Directors are made inside: one for a closed accelerator would never reach the library to be freed.
	return a.do(func(h capi.Accelerator, e *string) {
		h.RegisterForCheckpointing(capi.NewDirectorStateHandler(&stateAdapter{s}), e)
	})
}

// RegisterAveragedModel is Accelerate's register_for_checkpointing(averaged_model): SaveState
// writes avg's state dict as custom_checkpoint_<i>.safetensors (i counts registered objects,
// RegisterForCheckpointing's too), LoadState checks and restores it. The accelerator keeps the
// averages alive: avg may be closed after this.
func (a *Accelerator) RegisterAveragedModel(avg *AveragedModel) error {
	vh, err := avg.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(avg)
	return a.do(func(h capi.Accelerator, e *string) { h.RegisterAveragedModel(vh, e) })
}

// RegisterSaveStatePreHook: fn runs with the checkpoint's folder (files written there become part
// of the checkpoint) before SaveState writes it; an error aborts it.
func (a *Accelerator) RegisterSaveStatePreHook(fn func(dir string) error) error {
	_, err := a.RegisterRemovableSaveStatePreHook(fn)
	return err
}

// RegisterLoadStatePreHook: fn runs with the folder before LoadState reads it; an error aborts it.
func (a *Accelerator) RegisterLoadStatePreHook(fn func(dir string) error) error {
	_, err := a.RegisterRemovableLoadStatePreHook(fn)
	return err
}

// RegisterRemovableSaveStatePreHook is RegisterSaveStatePreHook with a handle that removes the
// hook again (what Accelerate's register_save_state_pre_hook returns).
func (a *Accelerator) RegisterRemovableSaveStatePreHook(fn func(dir string) error) (*RemovableHandle, error) {
	return a.registerStatePreHook(fn, capi.Accelerator.RegisterSaveStatePreHook)
}

// RegisterRemovableLoadStatePreHook is RegisterLoadStatePreHook with a handle that removes it again.
func (a *Accelerator) RegisterRemovableLoadStatePreHook(fn func(dir string) error) (*RemovableHandle, error) {
	return a.registerStatePreHook(fn, capi.Accelerator.RegisterLoadStatePreHook)
}

func (a *Accelerator) registerStatePreHook(fn func(dir string) error,
	register func(capi.Accelerator, capi.CheckpointHook, *string) int64) (*RemovableHandle, error) {
	return a.registerHook(fn == nil, func(h capi.Accelerator, e *string) int64 {
		return register(h, capi.NewDirectorCheckpointHook(&hookAdapter{fn}), e)
	})
}

// registerHook registers a pre-hook of either form (missing: its function is nil) and hands out its handle.
func (a *Accelerator) registerHook(missing bool, register func(capi.Accelerator, *string) int64) (*RemovableHandle, error) {
	if missing {
		return nil, nilArgument("the hook")
	}
	var id int64
	if err := a.do(func(h capi.Accelerator, e *string) { id = register(h, e) }); err != nil {
		return nil, err
	}
	return &RemovableHandle{a, id}, nil
}

// RegisterSaveStateModelsPreHook is Accelerate's register_save_state_pre_hook(hook(models, weights,
// dir)): fn runs with the models whose weights the library will save and the checkpoint's folder
// (files written there become part of the checkpoint); a hook that saves a model's weights itself
// takes it out (models.Remove). An error aborts the save on every process.
func (a *Accelerator) RegisterSaveStateModelsPreHook(fn func(models *CheckpointModels, dir string) error) (*RemovableHandle, error) {
	return a.registerModelsPreHook(fn, capi.Accelerator.RegisterSaveStateModelsPreHook)
}

// RegisterLoadStateModelsPreHook is Accelerate's register_load_state_pre_hook(hook(models, dir)): fn
// takes out the models it loads itself, those a save hook took out.
func (a *Accelerator) RegisterLoadStateModelsPreHook(fn func(models *CheckpointModels, dir string) error) (*RemovableHandle, error) {
	return a.registerModelsPreHook(fn, capi.Accelerator.RegisterLoadStateModelsPreHook)
}

func (a *Accelerator) registerModelsPreHook(fn func(*CheckpointModels, string) error,
	register func(capi.Accelerator, capi.ModelsCheckpointHook, *string) int64) (*RemovableHandle, error) {
	return a.registerHook(fn == nil, func(h capi.Accelerator, e *string) int64 {
		return register(h, capi.NewDirectorModelsCheckpointHook(&modelsHookAdapter{fn}), e)
	})
}

// CheckpointModels are the prepared models a checkpoint pre-hook is handed, in prepare order: those
// whose weights the library will save or load. Usable while the hook runs only (ErrInvalidHandle after).
type CheckpointModels struct {
	view capi.CheckpointModelsView // nil once the hook has returned
}

func (m *CheckpointModels) live() (capi.CheckpointModelsView, error) {
	if m == nil || m.view == nil {
		return nil, &Error{Status: StatusInvalidHandle,
			Message: "these models were handed to a checkpoint pre-hook that has returned"}
	}
	return m.view, nil
}

// Len is how many models are left to the library.
func (m *CheckpointModels) Len() (int, error) {
	v, err := m.live()
	if err != nil {
		return 0, err
	}
	n, err := call(func(e *string) int64 { return v.Size(e) })
	return int(n), err
}

// Model is the i-th model left: a new handle to the prepared model, which the caller closes.
func (m *CheckpointModels) Model(i int) (*Model, error) {
	v, err := m.live()
	if err == nil {
		err = notNegative("index", i)
	}
	if err != nil {
		return nil, err
	}
	return adoptModel(call(func(e *string) capi.Model { return v.Model(int64(i), e) }))
}

// Index is the i-th model's place in prepare order.
func (m *CheckpointModels) Index(i int) (int64, error) {
	v, err := m.live()
	if err == nil {
		err = notNegative("index", i)
	}
	if err != nil {
		return 0, err
	}
	return call(func(e *string) int64 { return v.Index(int64(i), e) })
}

// Remove takes the i-th model out (the later ones move up): the library neither writes nor reads its
// weights, and the checkpoint's weight files number the models left (Accelerate's weights.pop(i),
// models.pop(i)). A model prepared with sharded data parallelism cannot be taken out (ErrUnsupported).
func (m *CheckpointModels) Remove(i int) error {
	v, err := m.live()
	if err == nil {
		err = notNegative("index", i)
	}
	if err != nil {
		return err
	}
	return call0(func(e *string) { v.Remove(int64(i), e) })
}

// RemovableHandle removes a save or load pre-hook (Accelerate's RemovableHandle).
type RemovableHandle struct {
	acc *Accelerator
	id  int64
}

// Remove: the hook runs no more (a SaveState or LoadState already running it finishes with it).
// Again, or once the accelerator is closed (its hooks went with it), Remove does nothing.
func (r *RemovableHandle) Remove() error {
	if r == nil {
		return nilArgument("the handle")
	}
	if !r.acc.r.isLive() {
		return nil
	}
	return r.acc.do(func(h capi.Accelerator, e *string) { h.RemoveStatePreHook(r.id, e) })
}

// OnTraceReady is Accelerate's ProfileKwargs(on_trace_ready=fn), for every later profile: fn runs
// with the step at which each recorded cycle ends, and ProfileSummary and ExportChromeTrace read
// that cycle in it. An error or a panic fails that profile step or end (ErrIO).
func (a *Accelerator) OnTraceReady(fn func(step int64) error) error {
	if fn == nil {
		return nilArgument("the handler")
	}
	return a.do(func(h capi.Accelerator, e *string) {
		h.OnTraceReady(capi.NewDirectorTraceReady(&traceReadyAdapter{fn}), e)
	})
}

func (a *Accelerator) AddTracker(name string, t TrackerFuncs) error {
	// The name first: a tracker refused before the library takes it would never be released.
	if _, err := appendNulTerminated(nil, "AddTracker: the name", name); err != nil {
		return err
	}
	return a.do(func(h capi.Accelerator, e *string) {
		h.AddTracker(name, capi.NewDirectorTracker(&trackerAdapter{t}), e)
	})
}

// InitTrackers starts a run; configJSON is a JSON object of hyper-parameters ("" for none).
func (a *Accelerator) InitTrackers(project, configJSON string) error {
	return a.do(func(h capi.Accelerator, e *string) { h.InitTrackers(project, configJSON, e) })
}

// InitTrackersWith is Accelerate's init_trackers(project_name, config, init_kwargs): initKwargsJSON is
// a JSON object from tracker names to their keyword arguments, e.g. {"mlflow": {"run_name": "baseline"}}
// ("" for none).
func (a *Accelerator) InitTrackersWith(project, configJSON, initKwargsJSON string) error {
	return a.do(func(h capi.Accelerator, e *string) { h.InitTrackersWith(project, configJSON, initKwargsJSON, e) })
}

// Log logs values at step, or at the step after the last one when step < 0.
func (a *Accelerator) Log(values map[string]float64, step int64) error {
	return a.LogWith(values, step, "")
}

// LogWith is Log with Accelerate's log_kwargs: logKwargsJSON is a JSON object from tracker names to
// the keyword arguments of their log, e.g. {"tensorboard": {"walltime": 1700000000.5}} ("" for none).
func (a *Accelerator) LogWith(values map[string]float64, step int64, logKwargsJSON string) error {
	names, data, err := namedValues("log: the metric name", values)
	if err != nil {
		return err
	}
	return a.do(func(h capi.Accelerator, e *string) { h.LogValues(names, data, step, logKwargsJSON, e) })
}

// namedValues is values' names, each NUL-terminated, and its values in the same order.
func namedValues(what string, values map[string]float64) ([]byte, []float64, error) {
	var names []byte
	data := make([]float64, 0, len(values))
	for k, v := range values {
		var err error
		if names, err = appendNulTerminated(names, what, k); err != nil {
			return nil, nil, err
		}
		data = append(data, v)
	}
	return names, data, nil
}

// LogScalars is Accelerate's log of a dict value (TensorBoard's add_scalars): values by name under
// mainTag, at step or at the step after the last one when step < 0. TensorBoard draws them in one
// chart; the other trackers get "mainTag/name".
func (a *Accelerator) LogScalars(mainTag string, values map[string]float64, step int64) error {
	return a.LogScalarsWith(mainTag, values, step, "")
}

// LogScalarsWith is LogScalars with Accelerate's log_kwargs, as LogWith's (TensorBoard's add_scalars
// takes walltime alone).
func (a *Accelerator) LogScalarsWith(mainTag string, values map[string]float64, step int64, logKwargsJSON string) error {
	names, data, err := namedValues("LogScalars: the name", values)
	if err != nil {
		return err
	}
	return a.do(func(h capi.Accelerator, e *string) { h.LogGroup(mainTag, names, data, step, logKwargsJSON, e) })
}

// LogText is Accelerate's log of str values (TensorBoard's add_text): texts by name at step, or at
// the step after the last one when step < 0. Program trackers get them through TrackerFuncs.LogText.
func (a *Accelerator) LogText(texts map[string]string, step int64) error {
	return a.LogTextWith(texts, step, "")
}

// LogTextWith is LogText with Accelerate's log_kwargs, as LogWith's (TensorBoard's add_text takes
// walltime alone).
func (a *Accelerator) LogTextWith(texts map[string]string, step int64, logKwargsJSON string) error {
	var names, values []byte
	for k, v := range texts {
		var err error
		if names, err = appendNulTerminated(names, "LogText: the name", k); err != nil {
			return err
		}
		if values, err = appendNulTerminated(values, "LogText: the text", v); err != nil {
			return err
		}
	}
	return a.do(func(h capi.Accelerator, e *string) { h.LogTexts(names, values, step, logKwargsJSON, e) })
}

// LogImages is Accelerate's TensorBoardTracker.log_images (torch's add_images): images by name at
// step, or at the step after the last one when step < 0; dataformats "" is "NCHW" (a batch shown as a
// grid), else an order of NCHW, CHW or HW. Only TensorBoard shows them.
func (a *Accelerator) LogImages(images map[string]*Tensor, step int64, dataformats string) error {
	var names []byte
	tensors := make([]*Tensor, 0, len(images))
	for k, t := range images {
		var err error
		if names, err = appendNulTerminated(names, "LogImages: the name", k); err != nil {
			return err
		}
		tensors = append(tensors, t)
	}
	list, err := NewTensorList(tensors...)
	if err != nil {
		return err
	}
	defer list.Close()
	return a.do(func(h capi.Accelerator, e *string) { h.LogImages(names, list.r.h, step, dataformats, e) })
}

// LogHistogram is torch's SummaryWriter.add_histogram: the histogram of values' numbers at step (< 0:
// the step after the last one), in TensorBoard's HISTOGRAMS dashboard. bins "" is "tensorflow"
// (SummaryWriter's default bins), else a number of equal-width bins ("64"); maxBins 0 for no limit.
func (a *Accelerator) LogHistogram(name string, values *Tensor, step int64, bins string, maxBins int64) error {
	vh, err := values.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(values)
	return a.do(func(h capi.Accelerator, e *string) { h.LogHistogramWith(name, vh, step, bins, maxBins, e) })
}

// LogArtifact is MLflow's log_artifact / log_artifacts: the file or folder at localPath kept with the
// tracker's current run under artifactPath ("" for the run's artifact root). Only mlflow keeps
// artifacts (ErrUnsupported for the others).
func (a *Accelerator) LogArtifact(tracker, localPath, artifactPath string) error {
	return a.do(func(h capi.Accelerator, e *string) { h.LogArtifact(tracker, localPath, artifactPath, e) })
}

// nulJoined is each of names' bytes and a NUL, the form the library's name lists take.
func nulJoined(what string, names []string) (encoded []byte, err error) {
	for _, name := range names {
		if encoded, err = appendNulTerminated(encoded, what, name); err != nil {
			return nil, err
		}
	}
	return encoded, nil
}

// appendNulTerminated appends s's bytes and a NUL: s may hold any other character.
func appendNulTerminated(out []byte, what, s string) ([]byte, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf("%s %q holds a NUL character", what, s)}
	}
	return append(append(out, s...), 0), nil
}
func (a *Accelerator) LogScalar(name string, value float64, step int64) error {
	return a.do(func(h capi.Accelerator, e *string) { h.LogScalar(name, value, step, e) })
}
func (a *Accelerator) EndTraining() error {
	return a.do(func(h capi.Accelerator, e *string) { h.EndTraining(e) })
}
func (a *Accelerator) TrackerNames() ([]string, error) {
	return stringList(with(a.ref(), func(h capi.Accelerator, e *string) capi.StringList { return h.TrackerNames(e) }))
}
func (a *Accelerator) TrackerPath(name string) (string, error) {
	return with(a.ref(), func(h capi.Accelerator, e *string) string { return h.TrackerPath(name, e) })
}

// Save writes named tensors as one safetensors file, once per machine.
func (a *Accelerator) Save(tensors *TensorList, path string) error {
	lh, err := tensors.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(tensors)
	return a.do(func(h capi.Accelerator, e *string) { h.Save(lh, path, e) })
}

// StateDict is a prepared model's parameters and buffers on the CPU (unwrap: the model's own names).
func (a *Accelerator) StateDict(m *Model, unwrap bool) (*TensorList, error) {
	mh, err := m.ref().get()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(m)
	return wrapTensorList(with(a.ref(), func(h capi.Accelerator, e *string) capi.TensorList { return h.GetStateDict(mh, unwrap, e) }))
}

// Iteration is how many checkpoints SaveState wrote (or LoadState restored) so far.
func (a *Accelerator) Iteration() int64 {
	return value(a.ref(), func(h capi.Accelerator, e *string) int64 { return h.Iteration(e) })
}

// UnscaleGradients divides an optimizer's gradients (nil: every prepared one) by the fp16 scale.
func (a *Accelerator) UnscaleGradients(o *Optimizer) error {
	var oh capi.Optimizer = capi.SwigcptrOptimizer(0)
	if o != nil {
		var err error
		if oh, err = o.ref().get(); err != nil {
			return err
		}
		defer runtime.KeepAlive(o)
	}
	return a.do(func(h capi.Accelerator, e *string) { h.UnscaleGradients(oh, e) })
}

// Autocast runs fn under the accelerator's mixed precision (enabled false: autocast off). libtorch's
// autocast state belongs to an OS thread, so the goroutine is locked to one for the call.
func (a *Accelerator) Autocast(enabled bool, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := a.do(func(h capi.Accelerator, e *string) { h.AutocastBegin(enabled, e) }); err != nil {
		return err
	}
	ferr := fn()
	if err := a.do(func(h capi.Accelerator, e *string) { h.AutocastEnd(e) }); ferr == nil {
		ferr = err
	}
	return ferr
}

// SchedulerFromLambda is PyTorch's LambdaLR: lr = base_lr * factor(step), at creation (step 0) and
// at every step. An error or a panic fails the step (ErrIO) and leaves the rates as they were.
func SchedulerFromLambda(opt *Optimizer, factor func(step int64) (float64, error)) (*Scheduler, error) {
	if factor == nil {
		return nil, nilArgument("the factor function")
	}
	return adoptScheduler(with(opt.ref(), func(h capi.Optimizer, e *string) capi.Scheduler {
		return capi.SchedulerFromLrLambda(h, capi.NewDirectorLrLambda(&lrAdapter{factor}), e)
	}))
}

// SchedulerFromMultiplicative is PyTorch's MultiplicativeLR: lr = the rate before * factor(step), at
// every step from step 1 (not called for step 0). An error or a panic fails the step as
// SchedulerFromLambda's does.
func SchedulerFromMultiplicative(opt *Optimizer, factor func(step int64) (float64, error)) (*Scheduler, error) {
	if factor == nil {
		return nil, nilArgument("the factor function")
	}
	return adoptScheduler(with(opt.ref(), func(h capi.Optimizer, e *string) capi.Scheduler {
		return capi.SchedulerFromLrMultiplicative(h, capi.NewDirectorLrLambda(&lrAdapter{factor}), e)
	}))
}

// SchedulerFromLambdas is PyTorch's LambdaLR(opt, [fn0, fn1, ...]): group g's lr = its base_lr *
// factors[g](step), one function per parameter group (another count is refused), called in group order.
func SchedulerFromLambdas(opt *Optimizer, factors []func(step int64) (float64, error)) (*Scheduler, error) {
	if err := groupFunctionsSet(factors); err != nil {
		return nil, err
	}
	return adoptScheduler(with(opt.ref(), func(h capi.Optimizer, e *string) capi.Scheduler {
		return capi.SchedulerFromGroupLrLambda(h, int64(len(factors)), capi.NewDirectorGroupLrLambda(&groupLrAdapter{factors}), e)
	}))
}

// SchedulerFromMultiplicatives is PyTorch's MultiplicativeLR(opt, [fn0, fn1, ...]): group g's lr = its
// rate before * factors[g](step).
func SchedulerFromMultiplicatives(opt *Optimizer, factors []func(step int64) (float64, error)) (*Scheduler, error) {
	if err := groupFunctionsSet(factors); err != nil {
		return nil, err
	}
	return adoptScheduler(with(opt.ref(), func(h capi.Optimizer, e *string) capi.Scheduler {
		return capi.SchedulerFromGroupLrMultiplicative(h, int64(len(factors)),
			capi.NewDirectorGroupLrLambda(&groupLrAdapter{factors}), e)
	}))
}

// SchedulerFromCyclic is PyTorch's CyclicLR with scale_fn: opts are the "cyclic" schedule's (scale_mode
// "cycle" or "iterations"; no mode or gamma), and scale(x) scales the height of cycle x (from 1) or
// of step x.
func SchedulerFromCyclic(opt *Optimizer, opts *Options, scale func(x int64) (float64, error)) (*Scheduler, error) {
	if scale == nil {
		return nil, nilArgument("the scale function")
	}
	oh, err := opts.handleOf()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(opts)
	return adoptScheduler(with(opt.ref(), func(h capi.Optimizer, e *string) capi.Scheduler {
		return capi.SchedulerFromCyclicScale(h, oh, capi.NewDirectorLrLambda(&lrAdapter{scale}), e)
	}))
}

// groupFunctionsSet refuses a nil function among a schedule's per-group ones.
func groupFunctionsSet(factors []func(step int64) (float64, error)) error {
	for g, f := range factors {
		if f == nil {
			return nilArgument(fmt.Sprintf("the factor function of group %d", g))
		}
	}
	return nil
}

// Progress is a progress display shown by each machine's first process (as Accelerate's tqdm).
type Progress struct{ r ref[capi.Progress] }

func adoptProgress(h capi.Progress, err error) (*Progress, error) {
	return adopt(h, err, capi.DeleteProgress, func(r ref[capi.Progress]) *Progress { return &Progress{r} }, (*Progress).Close)
}
func (p *Progress) Close() error { return closeObject(p, p.ref()) }

func (p *Progress) ref() *ref[capi.Progress] {
	if p == nil {
		return nil
	}
	return &p.r
}

// NewProgress displays total steps (<= 0: unknown) labelled description.
func NewProgress(a *Accelerator, total int64, description string) (*Progress, error) {
	return adoptProgress(with(a.ref(), func(h capi.Accelerator, e *string) capi.Progress {
		return capi.NewProgress(h, total, description, e)
	}))
}
func (p *Progress) Update(n int64) error {
	return do(p.ref(), func(h capi.Progress, e *string) { h.Update(n, e) })
}
func (p *Progress) SetPostfix(text string) error {
	return do(p.ref(), func(h capi.Progress, e *string) { h.SetPostfix(text, e) })
}

// Finish shows the final state; later updates are ignored.
func (p *Progress) Finish() error {
	return do(p.ref(), func(h capi.Progress, e *string) { h.Finish(e) })
}

// The adapters run on the library's threads: every panic is recovered (protect) and every error
// returned as the callback's failure.
type stateAdapter struct{ s CheckpointState }

func (a *stateAdapter) Save(out capi.Bytes) int {
	return protect(1, func() int {
		data, err := a.s.Save()
		if err != nil {
			return fail(err)
		}
		if err := call0(func(e *string) { out.Append(data, e) }); err != nil {
			return fail(err)
		}
		return 0
	})
}

func (a *stateAdapter) Load(in capi.Bytes) int {
	return protect(1, func() int {
		data := make([]byte, in.Size())
		if err := call0(func(e *string) { in.CopyTo(data, e) }); err != nil {
			return fail(err)
		}
		if err := a.s.Load(data); err != nil {
			return fail(err)
		}
		return 0
	})
}

type hookAdapter struct{ fn func(string) error }

func (a *hookAdapter) Run(dir string) int {
	return protect(1, func() int {
		if err := a.fn(dir); err != nil {
			return fail(err)
		}
		return 0
	})
}

type modelsHookAdapter struct {
	fn func(*CheckpointModels, string) error
}

func (a *modelsHookAdapter) Run(view capi.CheckpointModelsView, dir string) int {
	models := &CheckpointModels{view}
	defer func() { models.view = nil }()
	return protect(1, func() int {
		if err := a.fn(models, dir); err != nil {
			return fail(err)
		}
		return 0
	})
}

type traceReadyAdapter struct{ fn func(int64) error }

func (a *traceReadyAdapter) Ready(step int64) int {
	return protect(1, func() int {
		if err := a.fn(step); err != nil {
			return fail(err)
		}
		return 0
	})
}

type trackerAdapter struct{ t TrackerFuncs }

func (a *trackerAdapter) Init(project, configJSON string) int {
	return protect(1, func() int {
		if a.t.Init != nil {
			if err := a.t.Init(project, configJSON); err != nil {
				return fail(err)
			}
		}
		return 0
	})
}

func (a *trackerAdapter) Log(m capi.Metrics, step int64) int {
	return protect(1, func() int {
		if a.t.Log == nil {
			return 0
		}
		values := map[string]float64{}
		for i := int64(0); i < m.Size(); i++ {
			name, err := call(func(e *string) string { return m.Name(i, e) })
			if err != nil {
				return fail(err)
			}
			v, err := call(func(e *string) float64 { return m.Value(i, e) })
			if err != nil {
				return fail(err)
			}
			values[name] = v
		}
		if err := a.t.Log(values, step); err != nil {
			return fail(err)
		}
		return 0
	})
}

func (a *trackerAdapter) LogText(texts capi.Texts, step int64) int {
	return protect(1, func() int {
		if a.t.LogText == nil {
			return 0
		}
		values := map[string]string{}
		for i := int64(0); i < texts.Size(); i++ {
			name, err := call(func(e *string) string { return texts.Name(i, e) })
			if err != nil {
				return fail(err)
			}
			text, err := call(func(e *string) string { return texts.Text(i, e) })
			if err != nil {
				return fail(err)
			}
			values[name] = text
		}
		if err := a.t.LogText(values, step); err != nil {
			return fail(err)
		}
		return 0
	})
}

func (a *trackerAdapter) TakesImages() bool { return a.t.LogImages != nil }

func (a *trackerAdapter) LogImages(images capi.Images, step int64) int {
	return protect(1, func() int {
		if a.t.LogImages == nil {
			return 0
		}
		pngs := map[string][]byte{}
		for i := int64(0); i < images.Size(); i++ {
			name, err := call(func(e *string) string { return images.Name(i, e) })
			if err != nil {
				return fail(err)
			}
			size, err := call(func(e *string) int64 { return images.PngSize(i, e) })
			if err != nil {
				return fail(err)
			}
			png := make([]byte, size)
			if err := call0(func(e *string) { images.CopyPng(i, png, e) }); err != nil {
				return fail(err)
			}
			pngs[name] = png
		}
		if err := a.t.LogImages(pngs, step); err != nil {
			return fail(err)
		}
		return 0
	})
}

func (a *trackerAdapter) TakesHistograms() bool { return a.t.LogHistogram != nil }

func (a *trackerAdapter) LogHistogram(view capi.HistogramView, step int64) int {
	return protect(1, func() int {
		if a.t.LogHistogram == nil {
			return 0
		}
		h := Histogram{Min: view.Min(), Max: view.Max(), Num: view.Num(), Sum: view.Sum(), SumSquares: view.SumSquares(),
			BucketLimits: make([]float64, view.Size()), BucketCounts: make([]float64, view.Size())}
		if err := call0(func(e *string) { view.CopyLimits(h.BucketLimits, e) }); err != nil {
			return fail(err)
		}
		if err := call0(func(e *string) { view.CopyCounts(h.BucketCounts, e) }); err != nil {
			return fail(err)
		}
		if err := a.t.LogHistogram(view.Name(), h, step); err != nil {
			return fail(err)
		}
		return 0
	})
}

func (a *trackerAdapter) Finish() int {
	return protect(1, func() int {
		if a.t.Finish != nil {
			if err := a.t.Finish(); err != nil {
				return fail(err)
			}
		}
		return 0
	})
}

type lrAdapter struct{ fn func(int64) (float64, error) }

type groupLrAdapter struct {
	fns []func(int64) (float64, error)
}

func (a *groupLrAdapter) Factor(group int64, step int64, out capi.LrFactor) int {
	return (&lrAdapter{a.fns[group]}).Factor(step, out)
}

func (a *lrAdapter) Factor(step int64, out capi.LrFactor) int {
	return protect(1, func() int {
		f, err := a.fn(step)
		if err != nil {
			return fail(err)
		}
		out.Set(f)
		return 0
	})
}
