package accelerate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accelerate-cpp/accelerate/go/internal/golden"
)

// The Go binding trains, gathers, reduces, saves and resumes exactly as the C API does, to the last
// bit.
func TestGoldenSameBitsAsTheCAPI(t *testing.T) {
	reference := os.Getenv("ACC_GOLDEN_REFERENCE")
	if reference == "" {
		t.Fatal("ACC_GOLDEN_REFERENCE (the C golden program's output) is not set")
	}
	mine, err := golden.Run(filepath.Join(t.TempDir(), "go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(reference)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(mine)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(want), "loss 15 ") || !strings.Contains(string(want), "param 2.weight 48 ") ||
		!strings.Contains(string(want), "saved at step 18\n") || !strings.Contains(string(want), "resumed at step 18\n") {
		t.Fatalf("unexpected reference:\n%s", want)
	}
	if string(want) != string(got) {
		t.Fatalf("the Go binding's numbers differ from the C API's:\nC:\n%s\nGo:\n%s", want, got)
	}
}
