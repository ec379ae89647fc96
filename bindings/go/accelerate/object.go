package accelerate

import "runtime"

// ref is the native handle an object owns: released once by Close, or by the finalizer backstop.
type ref[H interface{ Swigcptr() uintptr }] struct {
	h    H
	live bool
	kind string
	free func(H)
}

func (r *ref[H]) get() (H, error) {
	if !r.live {
		var zero H
		return zero, closedError(r.kind)
	}
	return r.h, nil
}

func (r *ref[H]) close() error {
	if !r.live {
		return closedError(r.kind)
	}
	r.live = false
	r.free(r.h)
	return nil
}

// adopt returns nil for a failed call or a NULL handle, else a new object owning h.
func adopt[T any, H interface{ Swigcptr() uintptr }](h H, err error, kind string, free func(H),
	make func(ref[H]) *T, closer func(*T) error) (*T, error) {
	if err != nil || h.Swigcptr() == 0 {
		return nil, err
	}
	obj := make(ref[H]{h: h, live: true, kind: kind, free: free})
	runtime.SetFinalizer(obj, closer)
	return obj, nil
}

// with runs f on the handle, keeping owner (and so the handle) alive until it returns.
func with[R any, H interface{ Swigcptr() uintptr }](owner any, r *ref[H], f func(h H, e *string) R) (R, error) {
	h, err := r.get()
	if err != nil {
		var zero R
		return zero, err
	}
	defer runtime.KeepAlive(owner)
	return call(func(e *string) R { return f(h, e) })
}

type none struct{}
