package accelerate

import (
	"runtime"

	"github.com/accelerate-cpp/accelerate/go/internal/capi"
)

// TensorList is an ordered list of optionally named tensors (batches, model outputs, state dicts).
type TensorList struct {
	r       ref[capi.TensorList]
	own     owned
	entries *owner // a batch's: the tensors taken from it, closed with it
}

func wrapTensorList(h capi.TensorList, err error) (*TensorList, error) {
	l, err := adopt(h, err, capi.DeleteTensorList, func(r ref[capi.TensorList]) *TensorList { return &TensorList{r: r} }, (*TensorList).Close)
	if l != nil {
		if s := currentScope(); s != nil {
			l.own.moveTo(l, s)
		}
	}
	return l, err
}

// Keep takes l out of the scope or pass over a loader that would close it: its caller closes it
// (and, for a batch, with it the tensors taken from it). Returns l.
func (l *TensorList) Keep() *TensorList {
	if l != nil {
		l.own.moveTo(l, nil)
	}
	return l
}

// entry hands a tensor taken from a batch to the batch.
func (l *TensorList) entry(t *Tensor, err error) (*Tensor, error) {
	if t != nil && l.entries != nil {
		t.own.moveTo(t, l.entries)
	}
	return t, err
}

// NewTensorList makes a list of the given tensors (the list holds its own references).
func NewTensorList(tensors ...*Tensor) (*TensorList, error) {
	l, err := wrapTensorList(call(func(e *string) capi.TensorList { return capi.NewTensorList(e) }))
	if err != nil {
		return nil, err
	}
	for _, t := range tensors {
		if err := l.Append("", t); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// Close releases the list (a batch: with the tensors taken from it); closing again returns an
// ErrInvalidHandle error.
func (l *TensorList) Close() error {
	if l != nil {
		l.own.moveTo(l, nil)
		if l.entries != nil {
			l.entries.closeAll()
		}
	}
	return closeObject(l, l.ref())
}

func (l *TensorList) ref() *ref[capi.TensorList] {
	if l == nil {
		return nil
	}
	return &l.r
}

// Append adds t under name ("" for none).
func (l *TensorList) Append(name string, t *Tensor) error {
	th, err := t.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(t)
	_, err = with(l.ref(), func(h capi.TensorList, e *string) struct{} { h.Append(name, th, e); return struct{}{} })
	return err
}

func (l *TensorList) Len() int {
	return int(value(l.ref(), func(h capi.TensorList, e *string) int64 { return h.Size(e) }))
}

// Get is a new handle to entry i. Of a batch from DataLoader.ForEach it is the batch's, closed with
// it (unless kept); otherwise the caller closes it (or its scope does).
func (l *TensorList) Get(i int) (*Tensor, error) {
	if err := notNegative("index", i); err != nil {
		return nil, err
	}
	return l.entry(wrapTensor(with(l.ref(), func(h capi.TensorList, e *string) capi.Tensor { return h.Get(int64(i), e) })))
}

func (l *TensorList) Name(i int) (string, error) {
	if err := notNegative("index", i); err != nil {
		return "", err
	}
	return with(l.ref(), func(h capi.TensorList, e *string) string { return h.Name(int64(i), e) })
}

// Find is a new handle to the entry called name, owned as Get's is.
func (l *TensorList) Find(name string) (*Tensor, error) {
	return l.entry(wrapTensor(with(l.ref(), func(h capi.TensorList, e *string) capi.Tensor { return h.Find(name, e) })))
}

func (l *TensorList) SaveSafetensors(path string) error {
	_, err := with(l.ref(), func(h capi.TensorList, e *string) struct{} { h.SaveSafetensors(path, e); return struct{}{} })
	return err
}

func LoadSafetensors(path string) (*TensorList, error) {
	return wrapTensorList(call(func(e *string) capi.TensorList { return capi.TensorListLoadSafetensors(path, e) }))
}

// readList copies each item of a library string list into Go with item, then releases the list.
func readList[T any](h capi.StringList, err error, item func(h capi.StringList, i int64) (T, error)) ([]T, error) {
	if err != nil || h == nil || h.Swigcptr() == 0 {
		return nil, err
	}
	defer capi.DeleteStringList(h)
	n, err := call(func(e *string) int64 { return h.Size(e) })
	if err != nil {
		return nil, err
	}
	out := make([]T, n)
	for i := range out {
		if out[i], err = item(h, int64(i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// stringList copies a library string list into Go and releases it.
func stringList(h capi.StringList, err error) ([]string, error) {
	return readList(h, err, func(h capi.StringList, i int64) (string, error) {
		return call(func(e *string) string { return h.Get(i, e) })
	})
}

// byteList copies a library list of byte items into Go and releases it.
func byteList(h capi.StringList, err error) ([][]byte, error) {
	return readList(h, err, func(h capi.StringList, i int64) ([]byte, error) {
		size, err := call(func(e *string) int64 { return h.ByteSize(i, e) })
		if err != nil {
			return nil, err
		}
		b := make([]byte, size)
		return b, call0(func(e *string) { h.CopyBytes(i, b, e) })
	})
}
