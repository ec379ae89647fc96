package accelerate

import (
	"reflect"
	"runtime"
	"sync/atomic"
)

type handle interface{ Swigcptr() uintptr }

// ref is the native handle an object owns: released once by Close, or by the finalizer backstop.
// A nil *ref stands for a nil object: get and close report it as they report a closed one.
type ref[H handle] struct {
	h H
	// 1 until closed; read and cleared atomically, as Close may run on another goroutine than a call
	// (a handle freed meanwhile is refused by the library: it is never reused).
	live uint32
	free func(H)
}

func (r *ref[H]) isLive() bool { return atomic.LoadUint32(&r.live) == 1 }

// kindOf names the objects holding an H ("Model" for capi.Model) in closed-handle errors.
func kindOf[H handle]() string { return reflect.TypeOf((*H)(nil)).Elem().Name() }

// get is the live handle, or the ErrInvalidHandle error for a nil or closed object (the accessor
// for receivers and arguments alike: m.ref().get()).
func (r *ref[H]) get() (H, error) {
	if r == nil || !r.isLive() {
		var zero H
		return zero, closedError(kindOf[H]())
	}
	return r.h, nil
}

// closeObject releases obj's handle r once and drops its finalizer; closing a nil or closed
// object returns the ErrInvalidHandle error.
func closeObject[T any, H handle](obj *T, r *ref[H]) error {
	if obj == nil || r == nil || !atomic.CompareAndSwapUint32(&r.live, 1, 0) {
		return closedError(kindOf[H]())
	}
	runtime.SetFinalizer(obj, nil)
	r.free(r.h)
	return nil
}

// adopt returns nil for a failed call or a NULL handle, else a new object owning h.
func adopt[T any, H handle](h H, err error, free func(H), make func(ref[H]) *T, closer func(*T) error) (*T, error) {
	if err != nil || any(h) == nil || h.Swigcptr() == 0 {
		return nil, err
	}
	obj := make(ref[H]{h: h, live: 1, free: free})
	runtime.SetFinalizer(obj, closer)
	return obj, nil
}

// with runs f on r's handle, keeping r's object (and so the handle) alive until it returns.
func with[R any, H handle](r *ref[H], f func(h H, e *string) R) (R, error) {
	h, err := r.get()
	if err != nil {
		var zero R
		return zero, err
	}
	defer runtime.KeepAlive(r)
	return call(func(e *string) R { return f(h, e) })
}

type none struct{}

// do runs a wrapped method that returns nothing but an error on a live handle.
func do[H handle](r *ref[H], f func(h H, e *string)) error {
	_, err := with(r, func(h H, e *string) none { f(h, e); return none{} })
	return err
}

// value runs a getter that fails only on a nil or closed object (its properties: a tensor's numel,
// a loader's epoch, a process's rank), returning its value alone; on a nil or closed object it
// panics with the ErrInvalidHandle error, as using a closed object is a bug in the program.
func value[R any, H handle](r *ref[H], f func(h H, e *string) R) R {
	v, err := with(r, f)
	if err != nil {
		panic(err)
	}
	return v
}
