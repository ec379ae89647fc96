package accelerate_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

// Profile records what f runs: the trace file and the operators' table.
func TestProfileWritesTheTraceAndTheTable(t *testing.T) {
	a := newCPUAccelerator(t, t.TempDir())
	t.Cleanup(func() { a.Close() }) // after the models (cleanups run last first)
	model := preparedLinear(t, a)
	dir := t.TempDir()
	opts, err := acc.NewOptions(acc.ProfileOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer opts.Close()
	if err := opts.Set("output_trace_dir", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ProfileSummary(); !errors.Is(err, acc.ErrInvalidArgument) || !strings.Contains(err.Error(), "no profile has ended yet") {
		t.Fatalf("a summary before any profile: %v", err)
	}
	x, _ := acc.FromFloat32s([]float32{1, 2}, 1, 2)
	defer x.Close()
	err = a.Profile(opts, func(step func() error) error {
		y, err := model.Forward(x)
		if err != nil {
			return err
		}
		y.Close()
		if err := a.Profile(nil, func(func() error) error { return nil }); !errors.Is(err, acc.ErrInvalidArgument) {
			t.Errorf("a second profile inside the first: %v", err)
		}
		return step()
	})
	if err != nil {
		t.Fatal(err)
	}
	trace, err := os.ReadFile(filepath.Join(dir, "profile_0.json"))
	if err != nil || !strings.Contains(string(trace), `"aten::addmm"`) {
		t.Fatalf("the trace: %v", err)
	}
	if table, err := a.ProfileSummary(); err != nil || !strings.Contains(table, "aten::addmm") {
		t.Fatalf("the table: %v\n%s", err, table)
	}
}

// OnTraceReady runs when the profile's recorded cycle ends (here, at its end: no schedule), and
// reads that cycle there; its error fails the end.
func TestOnTraceReadyReadsTheCycleThatEnded(t *testing.T) {
	a := newCPUAccelerator(t, t.TempDir())
	t.Cleanup(func() { a.Close() })
	model := preparedLinear(t, a)
	path := filepath.Join(t.TempDir(), "cycle.json")
	var steps []int64
	var table string
	err := a.OnTraceReady(func(step int64) error {
		steps = append(steps, step)
		var err error
		if table, err = a.ProfileSummary(); err != nil {
			return err
		}
		if err := a.ExportChromeTrace(path); err != nil {
			return err
		}
		return errors.New("the handler gave up")
	})
	if err != nil {
		t.Fatal(err)
	}
	x, _ := acc.FromFloat32s([]float32{1, 2}, 1, 2)
	defer x.Close()
	err = a.Profile(nil, func(step func() error) error {
		y, err := model.Forward(x)
		if err != nil {
			return err
		}
		y.Close()
		return step()
	})
	if !errors.Is(err, acc.ErrIO) || !strings.Contains(err.Error(), "the handler gave up") {
		t.Fatalf("want the handler's error from the profile's end, got %v", err)
	}
	if len(steps) != 1 || steps[0] != 1 || !strings.Contains(table, "aten::addmm") {
		t.Fatalf("steps %v, table:\n%s", steps, table)
	}
	if trace, err := os.ReadFile(path); err != nil || !strings.Contains(string(trace), `"aten::addmm"`) {
		t.Fatalf("the trace: %v", err)
	}
}
