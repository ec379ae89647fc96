package accelerate_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

// A run that does not fit (the library's ErrOutOfMemory, from a real allocation) is tried again smaller.
func TestFindExecutableBatchSizeShrinksABatchThatDoesNotFit(t *testing.T) {
	var tried []int64
	found, err := acc.FindExecutableBatchSize(16, func(batchSize int64) error {
		tried = append(tried, batchSize)
		perSample := int64(4)
		if batchSize > 8 {
			perSample = 1 << 46 // 2^48 bytes a sample: more than any address space
		}
		z, err := acc.Zeros(acc.Float32, "", batchSize, perSample)
		if err != nil {
			return err
		}
		return z.Close()
	})
	if err != nil || found != 8 {
		t.Fatalf("found %d, %v; want 8", found, err)
	}
	if want := []int64{16, 14, 12, 10, 9, 8}; !reflect.DeepEqual(tried, want) {
		t.Fatalf("tried %v, want %v", tried, want)
	}
}

func TestFindExecutableBatchSizeEndsOnOtherErrors(t *testing.T) {
	_, err := acc.FindExecutableBatchSize(32, func(int64) error { return errors.New("no data") })
	if !errors.Is(err, acc.ErrIO) || !strings.Contains(err.Error(), "the run with batch size 32 failed: no data") {
		t.Fatalf("a Go error: %v", err)
	}
	_, err = acc.FindExecutableBatchSize(32, func(int64) error { panic("boom") })
	if !errors.Is(err, acc.ErrIO) || !strings.Contains(err.Error(), "panic: boom") {
		t.Fatalf("a panic: %v", err)
	}
	// panic(nil) recovers nil before Go 1.21: still a failure, never the run's success.
	_, err = acc.FindExecutableBatchSize(32, func(int64) error { panic(nil) })
	if !errors.Is(err, acc.ErrIO) || !strings.Contains(err.Error(), "panic(nil)") {
		t.Fatalf("panic(nil): %v", err)
	}
	_, err = acc.FindExecutableBatchSize(32, func(int64) error {
		_, err := acc.Zeros(acc.DType(99), "", 1)
		return err
	})
	if !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("the library's error keeps its status: %v", err)
	}
	_, err = acc.FindExecutableBatchSize(2, func(int64) error { return acc.ErrOutOfMemory })
	if !errors.Is(err, acc.ErrOutOfMemory) || !strings.Contains(err.Error(), "no executable batch size found") {
		t.Fatalf("nothing fits: %v", err)
	}
}
