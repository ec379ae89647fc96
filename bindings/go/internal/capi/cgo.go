// Package capi is SWIG's Go output for bindings/accelerate.i (capi.swigcxx), plus the C constants
// the public package needs at compile time. It is internal: package accelerate is the API.
package capi

// #cgo pkg-config: accelerate
// #cgo CPPFLAGS: -I${SRCDIR}/../../..
// #cgo CXXFLAGS: -std=c++17
// #include "accelerate.h"
import "C"

// The ABI version this package was compiled against (accelerate.h's ACC_ABI_VERSION).
const ABIVersion = C.ACC_ABI_VERSION

// Status codes (acc_status).
const (
	StatusOK              = C.ACC_OK
	StatusInvalidArgument = C.ACC_ERR_INVALID_ARGUMENT
	StatusInvalidHandle   = C.ACC_ERR_INVALID_HANDLE
	StatusNotInitialized  = C.ACC_ERR_NOT_INITIALIZED
	StatusUnsupported     = C.ACC_ERR_UNSUPPORTED
	StatusOutOfMemory     = C.ACC_ERR_OUT_OF_MEMORY
	StatusTimeout         = C.ACC_ERR_TIMEOUT
	StatusAborted         = C.ACC_ERR_ABORTED
	StatusDistributed     = C.ACC_ERR_DISTRIBUTED
	StatusIO              = C.ACC_ERR_IO
	StatusVersionMismatch = C.ACC_ERR_VERSION_MISMATCH
	StatusInternal        = C.ACC_ERR_INTERNAL
)

// Element types (acc_dtype).
const (
	DTypeUndefined = C.ACC_DTYPE_UNDEFINED
	DTypeFloat32   = C.ACC_DTYPE_FLOAT32
	DTypeFloat64   = C.ACC_DTYPE_FLOAT64
	DTypeBFloat16  = C.ACC_DTYPE_BFLOAT16
	DTypeFloat16   = C.ACC_DTYPE_FLOAT16
	DTypeInt64     = C.ACC_DTYPE_INT64
	DTypeInt32     = C.ACC_DTYPE_INT32
	DTypeUint8     = C.ACC_DTYPE_UINT8
	DTypeBool      = C.ACC_DTYPE_BOOL
	DTypeInt8      = C.ACC_DTYPE_INT8
	DTypeInt16     = C.ACC_DTYPE_INT16
)

// Reductions, options kinds, placements, handle kinds, forward flags.
const (
	ReductionNone = C.ACC_REDUCTION_NONE
	ReductionMean = C.ACC_REDUCTION_MEAN
	ReductionSum  = C.ACC_REDUCTION_SUM

	OptionsOptimizer   = C.ACC_OPTIONS_OPTIMIZER
	OptionsScheduler   = C.ACC_OPTIONS_SCHEDULER
	OptionsDataLoader  = C.ACC_OPTIONS_DATALOADER
	OptionsAccelerator = C.ACC_OPTIONS_ACCELERATOR

	PlacementDefault = C.ACC_PLACEMENT_DEFAULT
	PlacementNo      = C.ACC_PLACEMENT_NO
	PlacementYes     = C.ACC_PLACEMENT_YES

	HandleAny         = C.ACC_HANDLE_ANY
	HandleTensor      = C.ACC_HANDLE_TENSOR
	HandleTensorList  = C.ACC_HANDLE_TENSOR_LIST
	HandleStringList  = C.ACC_HANDLE_STRING_LIST
	HandleOptions     = C.ACC_HANDLE_OPTIONS
	HandleModel       = C.ACC_HANDLE_MODEL
	HandleOptimizer   = C.ACC_HANDLE_OPTIMIZER
	HandleScheduler   = C.ACC_HANDLE_SCHEDULER
	HandleDataset     = C.ACC_HANDLE_DATASET
	HandleDataLoader  = C.ACC_HANDLE_DATALOADER
	HandleAccelerator = C.ACC_HANDLE_ACCELERATOR

	ForwardDefault = C.ACC_FORWARD_DEFAULT
	ForwardNoGrad  = C.ACC_FORWARD_NO_GRAD
)
