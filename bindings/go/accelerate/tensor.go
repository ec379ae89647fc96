package accelerate

import (
	"runtime"

	"github.com/accelerate-cpp/accelerate/go/internal/capi"
)

// DType is a tensor element type.
type DType int

const (
	Undefined DType = capi.DTypeUndefined
	Float32   DType = capi.DTypeFloat32
	Float64   DType = capi.DTypeFloat64
	BFloat16  DType = capi.DTypeBFloat16
	Float16   DType = capi.DTypeFloat16
	Int64     DType = capi.DTypeInt64
	Int32     DType = capi.DTypeInt32
	Uint8     DType = capi.DTypeUint8
	Bool      DType = capi.DTypeBool
	Int8      DType = capi.DTypeInt8
	Int16     DType = capi.DTypeInt16
)

// Reduction of a loss or a cross-process reduce.
type Reduction int

const (
	ReductionNone Reduction = capi.ReductionNone
	ReductionMean Reduction = capi.ReductionMean
	ReductionSum  Reduction = capi.ReductionSum
)

// Tensor is a libtorch tensor owned by Go; Close releases it (or the scope or batch that owns it).
type Tensor struct {
	r   ref[capi.Tensor]
	own owned
}

func wrapTensor(h capi.Tensor, err error) (*Tensor, error) {
	t, err := adopt(h, err, capi.DeleteTensor, func(r ref[capi.Tensor]) *Tensor { return &Tensor{r: r} }, (*Tensor).Close)
	if t != nil {
		if s := currentScope(); s != nil {
			t.own.moveTo(t, s)
		}
	}
	return t, err
}

// Close releases the tensor; closing again returns an ErrInvalidHandle error.
func (t *Tensor) Close() error {
	if t != nil {
		t.own.moveTo(t, nil)
	}
	return closeObject(t, t.ref())
}

// Keep takes t out of the scope or batch that would close it: its caller closes it. Returns t.
func (t *Tensor) Keep() *Tensor {
	if t != nil {
		t.own.moveTo(t, nil)
	}
	return t
}

func (t *Tensor) ref() *ref[capi.Tensor] {
	if t == nil {
		return nil
	}
	return &t.r
}

// FromFloat32s copies data into a new CPU tensor of the given shape.
func FromFloat32s(data []float32, shape ...int64) (*Tensor, error) {
	return wrapTensor(call(func(e *string) capi.Tensor { return capi.TensorFromFloats(data, shape, e) }))
}

// FromFloat64s copies data into a new float64 tensor.
func FromFloat64s(data []float64, shape ...int64) (*Tensor, error) {
	return wrapTensor(call(func(e *string) capi.Tensor { return capi.TensorFromDoubles(data, shape, e) }))
}

// FromInt64s copies data into a new int64 tensor.
func FromInt64s(data []int64, shape ...int64) (*Tensor, error) {
	return wrapTensor(call(func(e *string) capi.Tensor { return capi.TensorFromLongs(data, shape, e) }))
}

// FromInt32s copies data into a new int32 tensor.
func FromInt32s(data []int32, shape ...int64) (*Tensor, error) {
	return wrapTensor(call(func(e *string) capi.Tensor { return capi.TensorFromInts(data, shape, e) }))
}

// FromBytes copies data into a new uint8 tensor.
func FromBytes(data []byte, shape ...int64) (*Tensor, error) {
	return wrapTensor(call(func(e *string) capi.Tensor { return capi.TensorFromBytes(data, shape, e) }))
}

// Size is the bytes of one element (0 for Undefined or an unknown value).
func (d DType) Size() int { return int(capi.AccelerateDtypeSize(capi.Acc_dtype(d))) }

// Zeros is a new tensor of zeros on device ("" for the CPU).
func Zeros(dtype DType, device string, shape ...int64) (*Tensor, error) {
	return wrapTensor(call(func(e *string) capi.Tensor {
		return capi.TensorZeros(shape, capi.Acc_dtype(dtype), device, e)
	}))
}

// Rand is torch.rand(shape): a new float32 CPU tensor of uniform draws in [0, 1) from torch's
// global CPU generator (the one SetSeed seeds and RandomState saves).
func Rand(shape ...int64) (*Tensor, error) {
	return wrapTensor(call(func(e *string) capi.Tensor { return capi.TensorRand(shape, e) }))
}

// Randn is torch.randn(shape): standard normal draws from the same generator.
func Randn(shape ...int64) (*Tensor, error) {
	return wrapTensor(call(func(e *string) capi.Tensor { return capi.TensorRandn(shape, e) }))
}

// TensorFromIDXFile reads an IDX file ((Fashion-)MNIST format, plain or .gz).
func TensorFromIDXFile(path string) (*Tensor, error) {
	return wrapTensor(call(func(e *string) capi.Tensor { return capi.TensorFromIdxFile(path, e) }))
}

// TensorFromFileMmap maps a binary file as a read-only tensor (shape[0] may be -1).
func TensorFromFileMmap(path string, offset int64, dtype DType, shape ...int64) (*Tensor, error) {
	return wrapTensor(call(func(e *string) capi.Tensor {
		return capi.TensorFromFileMmap(path, offset, capi.Acc_dtype(dtype), shape, e)
	}))
}

func (t *Tensor) Numel() int64 {
	return value(t.ref(), func(h capi.Tensor, e *string) int64 { return h.Numel(e) })
}

func (t *Tensor) DType() DType {
	return DType(value(t.ref(), func(h capi.Tensor, e *string) capi.Acc_dtype { return h.Dtype(e) }))
}

func (t *Tensor) Device() string {
	return value(t.ref(), func(h capi.Tensor, e *string) string { return h.Device(e) })
}

func (t *Tensor) RequiresGrad() bool {
	return value(t.ref(), func(h capi.Tensor, e *string) bool { return h.RequiresGrad(e) })
}

func (t *Tensor) Shape() ([]int64, error) {
	n, err := with(t.ref(), func(h capi.Tensor, e *string) int64 { return h.Ndim(e) })
	if err != nil {
		return nil, err
	}
	shape := make([]int64, n)
	_, err = with(t.ref(), func(h capi.Tensor, e *string) struct{} { h.CopyShape(shape, e); return struct{}{} })
	return shape, err
}

func copyOut[T any](t *Tensor, copyFn func(h capi.Tensor, dst []T, e *string)) ([]T, error) {
	n, err := with(t.ref(), func(h capi.Tensor, e *string) int64 { return h.Numel(e) })
	if err != nil {
		return nil, err
	}
	out := make([]T, n)
	_, err = with(t.ref(), func(h capi.Tensor, e *string) struct{} { copyFn(h, out, e); return struct{}{} })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Float32s copies a float32 tensor's elements out (row-major).
func (t *Tensor) Float32s() ([]float32, error) {
	return copyOut(t, func(h capi.Tensor, d []float32, e *string) { h.CopyToFloats(d, e) })
}
func (t *Tensor) Float64s() ([]float64, error) {
	return copyOut(t, func(h capi.Tensor, d []float64, e *string) { h.CopyToDoubles(d, e) })
}
func (t *Tensor) Int64s() ([]int64, error) {
	return copyOut(t, func(h capi.Tensor, d []int64, e *string) { h.CopyToLongs(d, e) })
}
func (t *Tensor) Int32s() ([]int32, error) {
	return copyOut(t, func(h capi.Tensor, d []int32, e *string) { h.CopyToInts(d, e) })
}
func (t *Tensor) Bytes() ([]byte, error) {
	return copyOut(t, func(h capi.Tensor, d []byte, e *string) { h.CopyToBytes(d, e) })
}

// Item is the value of a one-element tensor.
func (t *Tensor) Item() (float64, error) {
	return with(t.ref(), func(h capi.Tensor, e *string) float64 { return h.Item(e) })
}

func (t *Tensor) Backward() error {
	_, err := with(t.ref(), func(h capi.Tensor, e *string) struct{} { h.Backward(e); return struct{}{} })
	return err
}

func (t *Tensor) newTensor(f func(h capi.Tensor, e *string) capi.Tensor) (*Tensor, error) {
	return wrapTensor(with(t.ref(), f))
}

// To converts to device ("" keeps it) and dtype (Undefined keeps it).
func (t *Tensor) To(device string, dtype DType) (*Tensor, error) {
	return t.newTensor(func(h capi.Tensor, e *string) capi.Tensor { return h.To(device, capi.Acc_dtype(dtype), e) })
}

// Grad is the accumulated gradient, or nil when there is none.
func (t *Tensor) Grad() (*Tensor, error) {
	return t.newTensor(func(h capi.Tensor, e *string) capi.Tensor { return h.Grad(e) })
}
func (t *Tensor) Sum() (*Tensor, error) {
	return t.newTensor(func(h capi.Tensor, e *string) capi.Tensor { return h.Sum(e) })
}
func (t *Tensor) Mean() (*Tensor, error) {
	return t.newTensor(func(h capi.Tensor, e *string) capi.Tensor { return h.Mean(e) })
}

// Reshape is torch.reshape: one dim may be -1 (logits [B, T, V] become [-1, V] for CrossEntropy).
func (t *Tensor) Reshape(shape ...int64) (*Tensor, error) {
	return t.newTensor(func(h capi.Tensor, e *string) capi.Tensor { return h.Reshape(shape, e) })
}
func (t *Tensor) Argmax(dim int64, keepdim bool) (*Tensor, error) {
	return t.newTensor(func(h capi.Tensor, e *string) capi.Tensor { return h.Argmax(dim, keepdim, e) })
}

// CountEqual counts the positions where t and other hold equal values.
func (t *Tensor) CountEqual(other *Tensor) (int64, error) {
	o, err := other.ref().get()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(other)
	return with(t.ref(), func(h capi.Tensor, e *string) int64 { return h.CountEqual(o, e) })
}

// Losses (PyTorch's definitions).
func lossCall(a, b *Tensor, f func(x, y capi.Tensor, e *string) capi.Tensor) (*Tensor, error) {
	x, err := a.ref().get()
	if err != nil {
		return nil, err
	}
	y, err := b.ref().get()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(a)
	defer runtime.KeepAlive(b)
	return wrapTensor(call(func(e *string) capi.Tensor { return f(x, y, e) }))
}

func CrossEntropy(logits, target *Tensor, reduction Reduction, labelSmoothing float64) (*Tensor, error) {
	return lossCall(logits, target, func(x, y capi.Tensor, e *string) capi.Tensor {
		return capi.LossCrossEntropy(x, y, capi.Acc_reduction(reduction), labelSmoothing, e)
	})
}
func NLLLoss(logProbs, target *Tensor, reduction Reduction) (*Tensor, error) {
	return lossCall(logProbs, target, func(x, y capi.Tensor, e *string) capi.Tensor {
		return capi.LossNll(x, y, capi.Acc_reduction(reduction), e)
	})
}
func MSELoss(input, target *Tensor, reduction Reduction) (*Tensor, error) {
	return lossCall(input, target, func(x, y capi.Tensor, e *string) capi.Tensor {
		return capi.LossMse(x, y, capi.Acc_reduction(reduction), e)
	})
}
func L1Loss(input, target *Tensor, reduction Reduction) (*Tensor, error) {
	return lossCall(input, target, func(x, y capi.Tensor, e *string) capi.Tensor {
		return capi.LossL1(x, y, capi.Acc_reduction(reduction), e)
	})
}
func SmoothL1Loss(input, target *Tensor, reduction Reduction, beta float64) (*Tensor, error) {
	return lossCall(input, target, func(x, y capi.Tensor, e *string) capi.Tensor {
		return capi.LossSmoothL1(x, y, capi.Acc_reduction(reduction), beta, e)
	})
}
func HuberLoss(input, target *Tensor, reduction Reduction, delta float64) (*Tensor, error) {
	return lossCall(input, target, func(x, y capi.Tensor, e *string) capi.Tensor {
		return capi.LossHuber(x, y, capi.Acc_reduction(reduction), delta, e)
	})
}
func BCEWithLogitsLoss(logits, target *Tensor, reduction Reduction) (*Tensor, error) {
	return lossCall(logits, target, func(x, y capi.Tensor, e *string) capi.Tensor {
		return capi.LossBceWithLogits(x, y, capi.Acc_reduction(reduction), e)
	})
}
