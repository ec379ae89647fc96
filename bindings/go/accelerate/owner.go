package accelerate

import "sync"

// closer is an object an owner can close: *Tensor, *TensorList.
type closer interface{ Close() error }

// owner holds objects closed together: a scope's tensors, a batch's tensors (those taken from it
// with Get or Find), a pass's current batch. An object has at most one owner; closing it on its
// own, or Keep, takes it out.
type owner struct {
	mu    sync.Mutex
	items map[closer]struct{}
}

func newOwner() *owner { return &owner{items: map[closer]struct{}{}} }

func (o *owner) add(c closer) {
	o.mu.Lock()
	o.items[c] = struct{}{}
	o.mu.Unlock()
}

func (o *owner) remove(c closer) {
	o.mu.Lock()
	delete(o.items, c)
	o.mu.Unlock()
}

func (o *owner) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.items)
}

// closeAll closes every object held (those already closed are skipped).
func (o *owner) closeAll() {
	o.mu.Lock()
	held := make([]closer, 0, len(o.items))
	for c := range o.items {
		held = append(held, c)
	}
	o.items = map[closer]struct{}{}
	o.mu.Unlock()
	for _, c := range held {
		c.Close()
	}
}

// owned is the part of an object that records its owner.
type owned struct {
	mu sync.Mutex
	by *owner
}

// moveTo hands self (the object holding o) to to; nil: to its caller alone.
func (o *owned) moveTo(self closer, to *owner) {
	o.mu.Lock()
	old := o.by
	o.by = to
	o.mu.Unlock()
	if old != nil {
		old.remove(self)
	}
	if to != nil {
		to.add(self)
	}
}
