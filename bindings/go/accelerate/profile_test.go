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
