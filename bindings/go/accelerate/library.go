package accelerate

import (
	"errors"

	"github.com/accelerate-cpp/accelerate/go/internal/capi"
)

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

// SetSeedWith is Accelerate's set_seed(seed, device_specific, deterministic): deviceSpecific adds this
// process's index to the seed, deterministic turns torch's deterministic algorithms on.
func SetSeedWith(seed int64, deviceSpecific, deterministic bool) error {
	return call0(func(e *string) { capi.AccelerateSetSeedWith(seed, deviceSpecific, deterministic, e) })
}

// RandomState is torch.get_rng_state(): the state of torch's global CPU generator (the one dropout,
// unseeded shuffles and Rand draw from) as a new 1-D uint8 tensor.
func RandomState() (*Tensor, error) {
	return wrapTensor(call(func(e *string) capi.Tensor { return capi.AccelerateGetRandomState(e) }))
}

// SetRandomState is torch.set_rng_state(state): restores a state RandomState returned. Anything
// else is ErrInvalidArgument and changes nothing.
func SetRandomState(state *Tensor) error {
	return do(state.ref(), func(h capi.Tensor, e *string) { capi.AccelerateSetRandomState(h, e) })
}

// HandleKind selects a kind of native object for LiveHandles.
type HandleKind int

const (
	HandleAny           HandleKind = capi.HandleAny
	HandleTensor        HandleKind = capi.HandleTensor
	HandleTensorList    HandleKind = capi.HandleTensorList
	HandleStringList    HandleKind = capi.HandleStringList
	HandleOptions       HandleKind = capi.HandleOptions
	HandleModel         HandleKind = capi.HandleModel
	HandleOptimizer     HandleKind = capi.HandleOptimizer
	HandleScheduler     HandleKind = capi.HandleScheduler
	HandleDataset       HandleKind = capi.HandleDataset
	HandleDataLoader    HandleKind = capi.HandleDataLoader
	HandleAccelerator   HandleKind = capi.HandleAccelerator
	HandleAveragedModel HandleKind = capi.HandleAveragedModel
	HandleProgress      HandleKind = capi.HandleProgress
	// A state-saving callback's sink, live during that callback only.
	HandleBytes HandleKind = capi.HandleBytes
	// The models a checkpoint pre-hook gets, live during that hook only.
	HandleCheckpointModels HandleKind = capi.HandleCheckpointModels
)

// LiveHandles counts the native objects of a kind that are alive (for leak checks).
func LiveHandles(kind HandleKind) int64 {
	return capi.AccelerateLiveHandles(capi.Acc_handle_kind(kind))
}

// LastErrorBacktrace is the C++ backtrace of this thread's last failure, if one was captured.
func LastErrorBacktrace() string { return capi.AccelerateLastErrorBacktrace() }

// FindExecutableBatchSize is Accelerate's find_executable_batch_size: it calls run with
// startingBatchSize and, while run fails with ErrOutOfMemory, again with 90% of the batch size
// (rounded down); it returns the batch size whose run succeeded. Another error ends the search: the
// library's with its status, any other (or a panic) as ErrIO with its text. run is called on the
// calling goroutine.
func FindExecutableBatchSize(startingBatchSize int64, run func(batchSize int64) error) (int64, error) {
	if run == nil {
		return 0, nilArgument("run")
	}
	d := capi.NewDirectorBatchSizeRun(&batchSizeAdapter{run})
	defer capi.DeleteDirectorBatchSizeRun(d)
	return call(func(e *string) int64 { return capi.AccelerateFindBatchSizeWith(startingBatchSize, d, e) })
}

// batchSizeAdapter returns the status of what failed (ErrOutOfMemory asks for a smaller batch).
type batchSizeAdapter struct{ fn func(int64) error }

func (a *batchSizeAdapter) Run(batchSize int64) int {
	return protect(int(StatusIO), func() int {
		err := a.fn(batchSize)
		if err == nil {
			return 0
		}
		var lib *Error
		if errors.As(err, &lib) && lib.Status != StatusOK {
			reportCallbackError(lib.Message)
			return int(lib.Status)
		}
		reportCallbackError(err.Error())
		return int(StatusIO)
	})
}
