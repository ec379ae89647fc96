package accelerate_test

import (
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

// DType.Size is acc_dtype_size: the bytes of one element, 0 for Undefined.
func TestDTypeSize(t *testing.T) {
	for d, want := range map[acc.DType]int{acc.Float32: 4, acc.Float64: 8, acc.BFloat16: 2, acc.Float16: 2,
		acc.Int64: 8, acc.Int32: 4, acc.Uint8: 1, acc.Bool: 1, acc.Int8: 1, acc.Int16: 2, acc.Undefined: 0, acc.DType(1000): 0} {
		if got := d.Size(); got != want {
			t.Errorf("DType(%d).Size() = %d, want %d", d, got, want)
		}
	}
}
