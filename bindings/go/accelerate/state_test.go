package accelerate_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

type memState struct{ saved, loaded []byte }

func (m *memState) Save() ([]byte, error)   { return m.saved, nil }
func (m *memState) Load(state []byte) error { m.loaded = state; return nil }

func newCPUAccelerator(t *testing.T, dir string) *acc.Accelerator {
	return newCPUAcceleratorWith(t, map[string]string{"project_dir": dir})
}

// newCPUAcceleratorWith is a CPU accelerator with these options besides.
func newCPUAcceleratorWith(t *testing.T, options map[string]string) *acc.Accelerator {
	o, err := acc.NewOptions(acc.AcceleratorOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if err := o.SetBool("cpu", true); err != nil {
		t.Fatal(err)
	}
	for k, v := range options {
		if err := o.SetString(k, v); err != nil {
			t.Fatal(err)
		}
	}
	a, err := acc.NewAccelerator(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestCheckpointStateAndHooks(t *testing.T) {
	dir := t.TempDir()
	a := newCPUAccelerator(t, dir)
	defer a.Close()
	st := &memState{saved: []byte{1, 2, 3}}
	var hooks []string
	if err := a.RegisterForCheckpointing(st); err != nil {
		t.Fatal(err)
	}
	if err := a.RegisterSaveStatePreHook(func(d string) error { hooks = append(hooks, "save "+d); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := a.RegisterLoadStatePreHook(func(d string) error { hooks = append(hooks, "load "+d); return nil }); err != nil {
		t.Fatal(err)
	}
	written, err := a.SaveState(filepath.Join(dir, "ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	if it := a.Iteration(); it != 1 {
		t.Fatalf("iteration %d after one save", it)
	}
	if _, err := a.LoadState(written); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st.loaded, []byte{1, 2, 3}) || !reflect.DeepEqual(hooks, []string{"save " + written, "load " + written}) {
		t.Fatalf("loaded %v, hooks %v", st.loaded, hooks)
	}
	// An unsharded checkpoint holds full weights: nothing to merge (merge-weights).
	err = acc.MergeShardedCheckpoint(written, 0, filepath.Join(dir, "merged"), "")
	if !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "holds no model shards") {
		t.Fatalf("want ErrInvalidArgument naming the missing shards, got %v", err)
	}
	// A panicking hook aborts the save with its message.
	if err := a.RegisterSaveStatePreHook(func(string) error { panic("disk quota") }); err != nil {
		t.Fatal(err)
	}
	_, err = a.SaveState(filepath.Join(dir, "ckpt2"))
	if !errors.Is(err, acc.ErrIO) || !strings.Contains(err.Error(), "disk quota") {
		t.Fatalf("want ErrIO with the panic's message, got %v", err)
	}
}

// Accelerate's hooks with their models: the save hook writes the first model's weights itself and
// takes it out (weights.pop(0)); the load hook reads them back and takes it out (models.pop(0)).
func TestHooksWithTheirModelsSaveAndLoadAModelThemselves(t *testing.T) {
	dir := t.TempDir()
	a := newCPUAccelerator(t, dir)
	defer a.Close()
	var prepared [2]*acc.Model
	for i := range prepared {
		raw, err := acc.ModelFromSpec(`[{"type":"linear","in_features":2,"out_features":1}]`)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if prepared[i], err = a.PrepareModel(raw, acc.PlacementDefault); err != nil {
			t.Fatal(err)
		}
		defer prepared[i].Close()
	}
	var seen []int64
	var kept *acc.CheckpointModels
	first := func(models *acc.CheckpointModels, dir string, use func(*acc.Model, string) error) error {
		m, err := models.Model(0)
		if err != nil {
			return err
		}
		defer m.Close()
		if err := use(m, filepath.Join(dir, "own.safetensors")); err != nil {
			return err
		}
		return models.Remove(0)
	}
	_, err := a.RegisterSaveStateModelsPreHook(func(models *acc.CheckpointModels, dir string) error {
		kept = models
		n, err := models.Len()
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			index, err := models.Index(i)
			if err != nil {
				return err
			}
			seen = append(seen, index)
		}
		return first(models, dir, func(m *acc.Model, path string) error {
			state, err := m.StateDict()
			if err != nil {
				return err
			}
			defer state.Close()
			return state.SaveSafetensors(path)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.RegisterLoadStateModelsPreHook(func(models *acc.CheckpointModels, dir string) error {
		return first(models, dir, func(m *acc.Model, path string) error {
			_, _, err := m.LoadSafetensors(path, true)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	written, err := a.SaveState(filepath.Join(dir, "ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seen, []int64{0, 1}) {
		t.Fatalf("the hook saw models %v", seen)
	}
	for file, want := range map[string]bool{"own.safetensors": true, "model.safetensors": true, "model_1.safetensors": false} {
		if _, err := os.Stat(filepath.Join(written, file)); (err == nil) != want {
			t.Errorf("%s present: %v, want %v", file, err == nil, want)
		}
	}
	if _, err := kept.Len(); !errors.Is(err, acc.ErrInvalidHandle) {
		t.Fatalf("models used after the hook: want ErrInvalidHandle, got %v", err)
	}
	weight := func() []float32 {
		w, err := prepared[0].Parameter("0.weight")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		v, err := w.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := weight()
	zeros, err := acc.NewTensorList()
	if err != nil {
		t.Fatal(err)
	}
	defer zeros.Close()
	z, err := acc.FromFloat32s([]float32{0, 0}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if err := zeros.Append("0.weight", z); err != nil {
		t.Fatal(err)
	}
	if err := prepared[0].LoadStateDict(zeros, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.LoadState(written); err != nil {
		t.Fatal(err)
	}
	if got := weight(); !reflect.DeepEqual(got, before) {
		t.Fatalf("model 0's weights after the load: %v, want %v", got, before)
	}
}

func TestARemovedPreHookRunsNoMore(t *testing.T) {
	dir := t.TempDir()
	a := newCPUAccelerator(t, dir)
	var hooks []string
	saveHook, err := a.RegisterRemovableSaveStatePreHook(func(d string) error { hooks = append(hooks, "save"); return nil })
	if err != nil {
		t.Fatal(err)
	}
	loadHook, err := a.RegisterRemovableLoadStatePreHook(func(d string) error { hooks = append(hooks, "load"); return nil })
	if err != nil {
		t.Fatal(err)
	}
	written, err := a.SaveState(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []*acc.RemovableHandle{saveHook, loadHook, saveHook} { // removing twice is a no-op
		if err := h.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.SaveState(filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.LoadState(written); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(hooks, []string{"save"}) {
		t.Fatalf("hooks ran %v, want only the first save's", hooks)
	}
	if _, err := a.RegisterRemovableSaveStatePreHook(nil); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("a nil hook: want ErrInvalidArgument, got %v", err)
	}
	a.Close()
	if err := saveHook.Remove(); err != nil { // the accelerator's hooks went with it
		t.Fatalf("Remove after Close: %v", err)
	}
}

func TestTrackerFuncs(t *testing.T) {
	a := newCPUAccelerator(t, t.TempDir())
	defer a.Close()
	var calls []string
	fail := false
	err := a.AddTracker("mine", acc.TrackerFuncs{
		Init: func(p, c string) error { calls = append(calls, "init "+p+" "+c); return nil },
		Log: func(v map[string]float64, step int64) error {
			if fail {
				return errors.New("tracker offline")
			}
			if _, odd := v["a\nb"]; odd {
				calls = append(calls, fmt.Sprint("names ", v["a\nb"], v["😀"], len(v)))
				return nil
			}
			calls = append(calls, "log", strings.Repeat("x", int(v["loss"])))
			return nil
		},
		Finish: func() error { calls = append(calls, "finish"); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.InitTrackers("run1", `{"lr":0.5}`); err != nil {
		t.Fatal(err)
	}
	if err := a.Log(map[string]float64{"loss": 2}, -1); err != nil {
		t.Fatal(err)
	}
	// Names cross as they are given: a newline, a character outside the BMP; a NUL is refused.
	if err := a.Log(map[string]float64{"a\nb": 1, "😀": 1}, -1); err != nil {
		t.Fatal(err)
	}
	if err := a.Log(map[string]float64{"a\x00b": 1}, -1); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("a name holding a NUL: %v", err)
	}
	fail = true
	if err := a.LogScalar("loss", 1, -1); !errors.Is(err, acc.ErrIO) || !strings.Contains(err.Error(), "tracker offline") {
		t.Fatalf("want ErrIO with the tracker's message, got %v", err)
	}
	if err := a.EndTraining(); err != nil {
		t.Fatal(err)
	}
	want := []string{`init run1 {"lr":0.5}`, "log", "xx", "names 1 1 2", "finish"}
	if !reflect.DeepEqual(calls, want) {
		t.Fatalf("calls %q, want %q", calls, want)
	}
}

// BackwardWith(loss, retainGraph, createGraph): two losses of one forward back-propagate in turn;
// without retaining the graph the second is refused.
func TestBackwardRetainsTheGraphOnRequest(t *testing.T) {
	a := newCPUAccelerator(t, t.TempDir())
	m, err := acc.ModelFromSpec(`[{"type":"linear","in_features":2,"out_features":1}]`)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prepared, err := a.PrepareModel(m, acc.PlacementDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer prepared.Close()
	x, _ := acc.FromFloat32s([]float32{1, 2}, 1, 2)
	defer x.Close()
	y, err := prepared.Forward(x)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	first, _ := y.Sum()
	defer first.Close()
	second, _ := y.Mean()
	defer second.Close()
	if err := a.BackwardWith(first, true, false); err != nil {
		t.Fatal(err)
	}
	if err := a.Backward(second); err != nil {
		t.Fatal(err)
	}
	if err := a.Backward(first); !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "second time") {
		t.Fatalf("a second backward through a freed graph: %v", err)
	}
}

// Texts reach a tracker's LogText as given; its Log sees numbers only, and a tracker without
// LogText leaves texts.
func TestTextsReachTheTrackersLogText(t *testing.T) {
	a := newCPUAccelerator(t, t.TempDir())
	var calls []string
	sample := "once upon a time\nthere was a 🚀"
	err := a.AddTracker("texts", acc.TrackerFuncs{
		Log: func(v map[string]float64, step int64) error {
			calls = append(calls, fmt.Sprint("log ", step))
			return nil
		},
		LogText: func(texts map[string]string, step int64) error {
			calls = append(calls, fmt.Sprint("text ", step, " ", texts["sample"], " ", len(texts)))
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AddTracker("numbers", acc.TrackerFuncs{
		Log: func(v map[string]float64, step int64) error {
			calls = append(calls, fmt.Sprint("numbers ", step))
			return nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.InitTrackers("run", ""); err != nil {
		t.Fatal(err)
	}
	if err := a.LogScalar("loss", 0.5, -1); err != nil {
		t.Fatal(err)
	}
	if err := a.LogText(map[string]string{"sample": sample}, -1); err != nil {
		t.Fatal(err)
	}
	if err := a.LogText(map[string]string{"a": "b\x00c"}, 5); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("a text holding a NUL: %v", err)
	}
	if err := a.EndTraining(); err != nil {
		t.Fatal(err)
	}
	want := []string{"log 0", "numbers 0", "text 1 " + sample + " 1"}
	if !reflect.DeepEqual(calls, want) {
		t.Fatalf("calls %q, want %q", calls, want)
	}
}

// Images reach TensorBoard's event file and a tracker's LogImages as PNGs under their names; a
// tracker without LogImages does not see them, though the step advances; a layout the tensor does
// not have is refused.
func TestImagesReachTensorBoardAndImageTrackers(t *testing.T) {
	a := newCPUAcceleratorWith(t, map[string]string{"project_dir": t.TempDir(), "log_with": "tensorboard"})
	defer a.Close()
	var calls []string
	if err := a.AddTracker("numbers", acc.TrackerFuncs{
		Log: func(v map[string]float64, step int64) error {
			calls = append(calls, fmt.Sprint("numbers ", step))
			return nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.AddTracker("pictures", acc.TrackerFuncs{
		LogImages: func(images map[string][]byte, step int64) error {
			for name, png := range images {
				calls = append(calls, fmt.Sprint("image ", step, " ", name, " ", string(png[:4])))
			}
			return nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	batch, err := acc.FromFloat32s([]float32{0, 0.25, 0.5, 1, 0.75, 0.5, 0.25, 0}, 2, 1, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Close()
	if err := a.InitTrackers("run", ""); err != nil {
		t.Fatal(err)
	}
	if err := a.LogImages(map[string]*acc.Tensor{"samples": batch}, 3, ""); err != nil {
		t.Fatal(err)
	}
	if err := a.LogImages(map[string]*acc.Tensor{"gray": batch}, -1, "NCWH"); err != nil {
		t.Fatal(err)
	}
	if err := a.LogImages(map[string]*acc.Tensor{"bad": batch}, -1, "CHW"); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "dataformats") {
		t.Fatalf("a layout the tensor does not have: %v", err)
	}
	if err := a.LogScalar("loss", 0.5, -1); err != nil {
		t.Fatal(err)
	}
	if err := a.EndTraining(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(calls, []string{"image 3 samples \x89PNG", "image 4 gray \x89PNG", "numbers 5"}) {
		t.Fatalf("calls %q", calls)
	}
	requireEventsHold(t, a, "samples", "gray", "\x89PNG")
}

// requireEventsHold fails t unless the tensorboard tracker's event file holds each of wants.
func requireEventsHold(t *testing.T, a *acc.Accelerator, wants ...string) {
	t.Helper()
	path, err := a.TrackerPath("tensorboard")
	if err != nil {
		t.Fatal(err)
	}
	events, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range wants {
		if !strings.Contains(string(events), want) {
			t.Fatalf("the event file lacks %q", want)
		}
	}
}

// A dict value (LogScalars) reaches a tracker as "main/name" values, and TensorBoard as add_scalars'
// folder per name.
func TestAGroupOfScalarsIsLoggedUnderItsMainTag(t *testing.T) {
	dir := t.TempDir()
	a := newCPUAcceleratorWith(t, map[string]string{"project_dir": dir, "log_with": "tensorboard"})
	defer a.Close()
	var got map[string]float64
	if err := a.AddTracker("mine", acc.TrackerFuncs{
		Log: func(v map[string]float64, step int64) error { got = v; return nil },
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.InitTrackers("run", ""); err != nil {
		t.Fatal(err)
	}
	if err := a.LogScalars("loss", map[string]float64{"train": 0.5, "eval": 0.25}, -1); err != nil {
		t.Fatal(err)
	}
	if err := a.LogScalars("loss", map[string]float64{"../x": 1}, -1); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("a name leading out of the run's folder: %v", err)
	}
	if err := a.EndTraining(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, map[string]float64{"loss/train": 0.5, "loss/eval": 0.25}) {
		t.Fatalf("the tracker got %v", got)
	}
	if st, err := os.Stat(filepath.Join(dir, "run", "loss_train")); err != nil || !st.IsDir() {
		t.Fatalf("no add_scalars folder: %v", err)
	}
}

// LogHistogram: an event of TensorBoard's with the histogram, and the same histogram to a tracker's
// LogHistogram (a tracker without one sees none); numpy's strategies are not built.
func TestHistogramsReachTensorBoardAndHistogramTrackers(t *testing.T) {
	dir := t.TempDir()
	a := newCPUAcceleratorWith(t, map[string]string{"project_dir": dir, "log_with": "tensorboard"})
	defer a.Close()
	w, err := acc.FromFloat32s([]float32{0.5, -1, 2, 2}, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var calls []string
	var received []acc.Histogram
	if err := a.AddTracker("numbers", acc.TrackerFuncs{Log: func(values map[string]float64, step int64) error {
		calls = append(calls, fmt.Sprint("numbers ", step))
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	if err := a.AddTracker("histograms", acc.TrackerFuncs{LogHistogram: func(name string, h acc.Histogram, step int64) error {
		calls = append(calls, fmt.Sprint("histogram ", step, " ", name))
		received = append(received, h)
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	if err := a.InitTrackers("run", ""); err != nil {
		t.Fatal(err)
	}
	if err := a.LogHistogram("layer/weights", w, 3, "", 0); err != nil {
		t.Fatal(err)
	}
	if err := a.LogHistogram("coarse", w, -1, "4", 0); err != nil {
		t.Fatal(err)
	}
	// Accelerate's log_kwargs: SummaryWriter's walltime is taken; a keyword its log lacks, refused.
	if err := a.LogWith(map[string]float64{"loss": 0.5}, 5, `{"tensorboard": {"walltime": 1234.5}}`); err != nil {
		t.Fatal(err)
	}
	if err := a.LogWith(map[string]float64{"loss": 0.5}, 6, `{"tensorboard": {"when": 1}}`); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), `takes no keyword argument "when"`) {
		t.Fatalf("a keyword SummaryWriter's log lacks: %v", err)
	}
	// Texts and groups take log_kwargs too: add_text's walltime; add_scalars refuses add_scalar's new_style.
	if err := a.LogTextWith(map[string]string{"note": "hi"}, 6, `{"tensorboard": {"walltime": 1.5}}`); err != nil {
		t.Fatal(err)
	}
	if err := a.LogScalarsWith("loss", map[string]float64{"train": 0.5}, 7, `{"tensorboard": {"new_style": true}}`); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), `takes no keyword argument "new_style"`) {
		t.Fatalf("add_scalar's new_style with a group: %v", err)
	}
	if err := a.LogHistogram("w", w, -1, "auto", 0); !errors.Is(err, acc.ErrUnsupported) {
		t.Fatalf("numpy's strategies: %v", err)
	}
	if err := a.EndTraining(); err != nil {
		t.Fatal(err)
	}
	requireEventsHold(t, a, "layer/weights", "coarse")
	if want := []string{"histogram 3 layer/weights", "histogram 4 coarse", "numbers 5"}; !reflect.DeepEqual(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	// 4 equal-width bins over [-1, 2]: -1 | (none) | 0.5 | 2, 2; an empty bin leads, as in torch.
	want := acc.Histogram{Min: -1, Max: 2, Num: 4, Sum: 3.5, SumSquares: 9.25,
		BucketLimits: []float64{-1, -0.25, 0.5, 1.25, 2}, BucketCounts: []float64{0, 1, 0, 1, 2}}
	if !reflect.DeepEqual(received[1], want) {
		t.Fatalf("coarse: %+v, want %+v", received[1], want)
	}
}

// log_with "mlflow" with init_kwargs: the run's name and parameters in MLflow's file store, a number
// as a metric line at its step; a keyword the tracker does not take is refused.
func TestMlflowRunsTakeInitKwargs(t *testing.T) {
	dir := t.TempDir()
	a := newCPUAcceleratorWith(t, map[string]string{"project_dir": dir, "log_with": "mlflow"})
	defer a.Close()
	if err := a.InitTrackersWith("run", "", `{"mlflow": {"run_nme": "x"}}`); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "run_nme") {
		t.Fatalf("a misspelt keyword: %v", err)
	}
	if err := a.InitTrackersWith("run", `{"lr": 0.5}`, `{"mlflow": {"run_name": "baseline"}}`); err != nil {
		t.Fatal(err)
	}
	if err := a.LogScalar("loss", 1.25, 3); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte("lr: 0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.LogArtifact("mlflow", config, "configs"); err != nil {
		t.Fatal(err)
	}
	if err := a.EndTraining(); err != nil {
		t.Fatal(err)
	}
	runDir, err := a.TrackerPath("mlflow")
	if err != nil {
		t.Fatal(err)
	}
	read := func(parts ...string) string {
		b, err := os.ReadFile(filepath.Join(append([]string{runDir}, parts...)...))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read("tags", "mlflow.runName"); got != "baseline" {
		t.Fatalf("run name %q", got)
	}
	if got := read("artifacts", "configs", "config.yaml"); got != "lr: 0.5\n" {
		t.Fatalf("artifact %q", got)
	}
	if got := read("params", "lr"); got != "0.5" {
		t.Fatalf("parameter lr %q", got)
	}
	if got := read("metrics", "loss"); !strings.HasSuffix(got, " 1.25 3\n") || strings.Count(got, "\n") != 1 {
		t.Fatalf("metric lines %q", got)
	}
}

// sgdOverALinearLayer is an SGD over a 2-to-1 linear layer, both closed when the test ends.
func sgdOverALinearLayer(t *testing.T) *acc.Optimizer {
	t.Helper()
	m, err := acc.ModelFromSpec(`[{"type":"linear","in_features":2,"out_features":1}]`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	opt, err := acc.NewOptimizer(m, "sgd", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { opt.Close() })
	return opt
}

// A tracker refused for a NUL in its name never reaches the library; parameter names cross whole (a
// newline is part of a name, never a separator).
func TestNamesAreRefusedOrCrossWhole(t *testing.T) {
	a := newCPUAccelerator(t, t.TempDir())
	if err := a.AddTracker("a\x00b", acc.TrackerFuncs{}); !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("a tracker name holding a NUL: %v", err)
	}
	if names, err := a.TrackerNames(); err != nil || len(names) != 0 {
		t.Fatalf("trackers %q, %v; want none", names, err)
	}
	opt := sgdOverALinearLayer(t)
	if err := opt.AddParamGroup([]string{"0.weight\n0.bias"}, nil); !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "0.weight\n0.bias") {
		t.Fatalf("two names joined by a newline: %v", err)
	}
	if err := opt.AddParamGroup([]string{"0.bias"}, nil); err != nil {
		t.Fatal(err)
	}
	if groups, _ := opt.NumParamGroups(); groups != 2 {
		t.Fatalf("%d parameter groups, want 2", groups)
	}
}

func TestSchedulerFromLambda(t *testing.T) {
	opt := sgdOverALinearLayer(t)
	base, _ := opt.LR(0)
	s, err := acc.SchedulerFromLambda(opt, func(step int64) (float64, error) {
		if step == 2 {
			return 0, errors.New("no step 2")
		}
		return math.Pow(0.5, float64(step)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Step(); err != nil {
		t.Fatal(err)
	}
	if lr, _ := opt.LR(0); lr != base/2 {
		t.Fatalf("lr %v, want %v", lr, base/2)
	}
	if err := s.Step(); !errors.Is(err, acc.ErrIO) || !strings.Contains(err.Error(), "no step 2") {
		t.Fatalf("want ErrIO with the lambda's message, got %v", err)
	}
}

// A nil function is refused when the object is made (ErrInvalidArgument naming it), not at its first
// call, where it used to be a nil dereference reported as ErrIO.
func TestANilFunctionIsRefusedWhenTheObjectIsMade(t *testing.T) {
	opt := sgdOverALinearLayer(t)
	a := newCPUAccelerator(t, t.TempDir())
	defer a.Close()
	var stream acc.StreamFunc
	for what, err := range map[string]error{
		"the factor function": func() error { _, err := acc.SchedulerFromLambda(opt, nil); return err }(),
		"the factor function of group 0": func() error {
			_, err := acc.SchedulerFromLambdas(opt, []func(int64) (float64, error){nil})
			return err
		}(),
		"the scale function":   func() error { _, err := acc.SchedulerFromCyclic(opt, nil, nil); return err }(),
		"the sample function":  func() error { _, err := acc.DatasetFromFunc(4, nil); return err }(),
		"the stream":           func() error { _, err := acc.DatasetFromStream(stream, -1); return err }(),
		"the checkpoint state": a.RegisterForCheckpointing(nil),
		"the hook":             a.RegisterSaveStatePreHook(nil),
		"the handler":          a.OnTraceReady(nil),
	} {
		if !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), what+" is nil") {
			t.Errorf("%s: want ErrInvalidArgument saying it is nil, got %v", what, err)
		}
	}
}

func TestEachGroupHasItsOwnFunctionAndACyclicScheduleTakesAScale(t *testing.T) {
	opt := sgdOverALinearLayer(t)
	if err := opt.SetLR(0, 0.8); err != nil {
		t.Fatal(err)
	}
	bias, _ := acc.NewOptions(acc.OptimizerOptions)
	defer bias.Close()
	if err := bias.SetFloat("lr", 0.4); err != nil {
		t.Fatal(err)
	}
	if err := opt.AddParamGroup([]string{"0.bias"}, bias); err != nil {
		t.Fatal(err)
	}
	half := func(int64) (float64, error) { return 0.5, nil }
	quarter := func(step int64) (float64, error) {
		if step == 1 {
			return 0, errors.New("no step 1")
		}
		return 0.25, nil
	}
	s, err := acc.SchedulerFromLambdas(opt, []func(int64) (float64, error){half, quarter}) // LambdaLR(opt, [f0, f1])
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if a, _ := opt.LR(0); a != 0.4 {
		t.Fatalf("group 0's rate %v, want 0.4", a)
	}
	if b, _ := opt.LR(1); b != 0.1 {
		t.Fatalf("group 1's rate %v, want 0.1", b)
	}
	if err := s.Step(); !errors.Is(err, acc.ErrIO) || !strings.Contains(err.Error(), "parameter group 1 at step 1") {
		t.Fatalf("want ErrIO naming group 1, got %v", err)
	}
	if _, err := acc.SchedulerFromMultiplicatives(opt, []func(int64) (float64, error){half}); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "expected 2 factors") {
		t.Fatalf("want the count refused, got %v", err)
	}
	co, _ := acc.NewOptions(acc.SchedulerOptions)
	defer co.Close()
	for k, v := range map[string]string{"base_lr": "0.1", "max_lr": "0.5", "step_size_up": "2", "scale_mode": "iterations"} {
		if err := co.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	cyclic, err := acc.SchedulerFromCyclic(opt, co, half)
	if err != nil {
		t.Fatal(err)
	}
	defer cyclic.Close()
	if err := cyclic.Step(); err != nil {
		t.Fatal(err)
	}
	// Halfway up, the height halved: 0.1 + (0.5 - 0.1) * 0.5 * 0.5; the momentum the other way.
	lr, _ := opt.LR(0)
	m, err := opt.Hyperparameter(0, "momentum")
	if err != nil || math.Abs(lr-0.2) > 1e-15 || math.Abs(m-(0.9-(0.9-0.8)*0.5*0.5)) > 1e-15 {
		t.Fatalf("lr %v momentum %v (%v), want 0.2 and 0.875", lr, m, err)
	}
}

func TestAMultiplicativeScheduleChainedWithAnotherMovesTheRateBefore(t *testing.T) {
	opt := sgdOverALinearLayer(t)
	if err := opt.SetLR(0, 0.8); err != nil {
		t.Fatal(err)
	}
	s, err := acc.SchedulerFromMultiplicative(opt, func(step int64) (float64, error) {
		if step == 4 {
			return 0, errors.New("no step 4")
		}
		return 0.5, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	co, _ := acc.NewOptions(acc.SchedulerOptions)
	defer co.Close()
	if err := co.SetFloat("factor", 0.5); err != nil {
		t.Fatal(err)
	}
	if err := co.SetInt("total_iters", 2); err != nil {
		t.Fatal(err)
	}
	// PyTorch's ChainedScheduler([MultiplicativeLR, ConstantLR]): halved at every step, the constant's
	// factor applied at once and undone at step 2.
	if err := s.Chain("constant_lr", co); err != nil {
		t.Fatal(err)
	}
	for i, w := range []float64{0.4, 0.2, 0.2, 0.1} {
		if i > 0 {
			if err := s.Step(); err != nil {
				t.Fatal(err)
			}
		}
		if lr, _ := opt.LR(0); lr != w {
			t.Fatalf("step %d: lr %v, want %v", i, lr, w)
		}
	}
	if err := s.Step(); !errors.Is(err, acc.ErrIO) || !strings.Contains(err.Error(), "no step 4") {
		t.Fatalf("want ErrIO with the factor's message, got %v", err)
	}
	if lr, _ := opt.LR(0); lr != 0.1 {
		t.Fatalf("a failed step moved the rate to %v", lr)
	}
	if err := s.Chain("exponential", nil); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("want ErrInvalidArgument for a chain made after a step, got %v", err)
	}
}

func TestASequenceHandsOverAtItsMilestone(t *testing.T) {
	opt := sgdOverALinearLayer(t)
	if err := opt.SetLR(0, 1.0); err != nil {
		t.Fatal(err)
	}
	lo, _ := acc.NewOptions(acc.SchedulerOptions)
	defer lo.Close()
	eo, _ := acc.NewOptions(acc.SchedulerOptions)
	defer eo.Close()
	for _, err := range []error{lo.SetFloat("start_factor", 0.5), lo.SetInt("total_iters", 2), eo.SetFloat("gamma", 0.5)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := acc.NewScheduler(opt, "linear_lr", lo)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Then(2, "exponential", eo); err != nil {
		t.Fatal(err)
	}
	want := []float64{0.5, 0.75, 1.0, 0.5} // linear_lr, then exponential from the base rate
	for i, w := range want {
		if i > 0 {
			if err := s.Step(); err != nil {
				t.Fatal(err)
			}
		}
		if lr, _ := s.LastLR(0); lr != w {
			t.Fatalf("step %d: lr %v, want %v", i, lr, w)
		}
	}
	if err := s.Then(5, "constant", nil); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("want ErrInvalidArgument for a sequence made after a step, got %v", err)
	}
}

func TestPlateauSchedulerStepsWithAMetric(t *testing.T) {
	opt := sgdOverALinearLayer(t)
	o, err := acc.NewOptions(acc.SchedulerOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if err := o.SetInt("patience", 0); err != nil {
		t.Fatal(err)
	}
	s, err := acc.NewScheduler(opt, "reduce_lr_on_plateau", o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base, _ := opt.LR(0)
	for _, metric := range []float64{2, 3} {
		if err := s.StepMetric(metric); err != nil {
			t.Fatal(err)
		}
	}
	if lr, _ := s.LastLR(0); lr != base*0.1 {
		t.Fatalf("lr %v, want %v", lr, base*0.1)
	}
	if err := s.Step(); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("want ErrInvalidArgument for a step without its metric, got %v", err)
	}
}
