package accelerate

import "accelerate/go/internal/capi"

// The package refuses to load against a library of another ABI (a clear message, not a crash).
func init() {
	if err := call0(func(e *string) { capi.AccelerateCheckBinding("Go", capi.ABIVersion, e) }); err != nil {
		panic(err.Error())
	}
}

// Version is the library's version ("0.1.0").
func Version() string { return capi.AccelerateVersion() }

// ABIVersion is the loaded library's ABI version.
func ABIVersion() int { return capi.AccelerateAbiVersion() }

// CheckABI fails with ErrVersionMismatch unless a caller built for `expected` can use the library.
func CheckABI(expected int) error {
	return call0(func(e *string) { capi.AccelerateCheckAbi(expected, e) })
}

// BuildInfo is a JSON description of the build (libtorch, CUDA, NCCL, BLAS).
func BuildInfo() string { return capi.AccelerateBuildInfo() }

// SetSeed seeds every random generator the library uses.
func SetSeed(seed int64) error { return call0(func(e *string) { capi.AccelerateSetSeed(seed, e) }) }

// HandleKind selects a kind of native object for LiveHandles.
type HandleKind int

const (
	HandleAny         HandleKind = capi.HandleAny
	HandleTensor      HandleKind = capi.HandleTensor
	HandleTensorList  HandleKind = capi.HandleTensorList
	HandleStringList  HandleKind = capi.HandleStringList
	HandleOptions     HandleKind = capi.HandleOptions
	HandleModel       HandleKind = capi.HandleModel
	HandleOptimizer   HandleKind = capi.HandleOptimizer
	HandleScheduler   HandleKind = capi.HandleScheduler
	HandleDataset     HandleKind = capi.HandleDataset
	HandleDataLoader  HandleKind = capi.HandleDataLoader
	HandleAccelerator HandleKind = capi.HandleAccelerator
)

// LiveHandles counts the native objects of a kind that are alive (for leak checks).
func LiveHandles(kind HandleKind) int64 {
	return capi.AccelerateLiveHandles(capi.Acc_handle_kind(kind))
}

// LastErrorBacktrace is the C++ backtrace of this thread's last failure, if one was captured.
func LastErrorBacktrace() string { return capi.AccelerateLastErrorBacktrace() }
