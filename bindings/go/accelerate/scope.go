package accelerate

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Scopes are kept per goroutine (Go has no goroutine-local storage: the goroutine is recognised by
// the number runtime.Stack prints). Nothing is looked up while no scope is open anywhere.
var scopes struct {
	open int32 // scopes open in the process
	mu   sync.Mutex
	byG  map[uint64][]*owner
}

// goroutineID is the number of the calling goroutine ("goroutine 18 [running]:").
func goroutineID() uint64 {
	var buf [40]byte
	n := runtime.Stack(buf[:], false)
	var id uint64
	for _, c := range buf[len("goroutine "):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

// currentScope is the calling goroutine's innermost open scope, or nil.
func currentScope() *owner {
	if atomic.LoadInt32(&scopes.open) == 0 {
		return nil
	}
	g := goroutineID()
	scopes.mu.Lock()
	defer scopes.mu.Unlock()
	if stack := scopes.byG[g]; len(stack) > 0 {
		return stack[len(stack)-1]
	}
	return nil
}

func pushScope() (*owner, uint64) {
	s, g := newOwner(), goroutineID()
	scopes.mu.Lock()
	if scopes.byG == nil {
		scopes.byG = map[uint64][]*owner{}
	}
	scopes.byG[g] = append(scopes.byG[g], s)
	scopes.mu.Unlock()
	atomic.AddInt32(&scopes.open, 1)
	return s, g
}

func popScope(s *owner, g uint64) {
	scopes.mu.Lock()
	stack := scopes.byG[g]
	for i := len(stack) - 1; i >= 0; i-- {
		if stack[i] == s {
			stack = append(stack[:i], stack[i+1:]...)
			break
		}
	}
	if len(stack) == 0 {
		delete(scopes.byG, g)
	} else {
		scopes.byG[g] = stack
	}
	scopes.mu.Unlock()
	atomic.AddInt32(&scopes.open, -1)
}

// WithScope runs f, then closes every Tensor and TensorList that this goroutine made while f ran
// (in no inner scope), unless it was taken out with Keep: a loop body that never closes its
// intermediate tensors stays flat. Scopes nest; objects made by other goroutines are not the
// scope's. Returns f's error (a panic in f still closes the scope's objects, then goes on).
//
//	err := accelerate.WithScope(func() error {
//		logits, _ := model.Forward(x)
//		loss, _ := accelerate.CrossEntropy(logits, y, accelerate.ReductionMean, 0)
//		return acc.Backward(loss)
//	})
func WithScope(f func() error) error {
	s, g := pushScope()
	defer func() {
		popScope(s, g)
		s.closeAll()
	}()
	return f()
}

// LiveTensors is the number of native tensors alive in the process (all languages and goroutines),
// for leak checks.
func LiveTensors() int64 { return LiveHandles(HandleTensor) }
