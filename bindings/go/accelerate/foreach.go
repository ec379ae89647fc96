package accelerate

import (
	"errors"

	"github.com/accelerate-cpp/accelerate/go/internal/capi"
)

// Break, returned by a ForEach body, ends the loop early without an error (like fs.SkipAll).
var Break = errors.New("accelerate: break out of ForEach")

var errEndedElsewhere = errors.New("accelerate: this ForEach's epoch was ended by another loop over the same " +
	"data loader (a ForEach inside its body, or on another goroutine) before its end; loops over one loader cannot nest")

// ForEach runs body on each batch of one epoch. The loop owns the batches: each batch, and every
// tensor taken from it with Get or Find, is closed after body returns, unless body kept it
// (batch.Keep()); what else body makes is its own (or a scope's: see WithScope). When body returns
// Break or an error, or panics, the epoch ends there (EndEpoch), as leaving a Python loop does; the
// error is returned (nil for Break). An epoch left unfinished by hand-driven Next calls is ended
// first, so ForEach starts at an epoch's beginning (or where LoadState or SkipFirstBatches put it).
func (l *DataLoader) ForEach(body func(batch *TensorList) error) (err error) {
	if err := l.EndEpoch(); err != nil {
		return err
	}
	pass := newOwner()
	l.mu.Lock()
	previous := l.pass
	l.pass = pass
	l.mu.Unlock()
	if previous != nil {
		previous.closeAll()
	}
	finished := false
	defer func() {
		pass.closeAll()
		l.mu.Lock()
		if l.pass == pass {
			l.pass = nil
		}
		l.mu.Unlock()
		if !finished {
			if endErr := l.EndEpoch(); err == nil && endErr != nil {
				err = endErr
			}
		}
		if errors.Is(err, Break) {
			err = nil
		}
	}()
	epoch := int64(-1) // the loader's epoch this loop runs in, from its first batch on
	for {
		pass.closeAll()
		// An epoch ended under this loop (by a ForEach over the same loader inside body, or on
		// another goroutine) would be followed silently by the next one: a nested loop would never end.
		now, in, err := l.epochState()
		if err != nil {
			return err
		}
		if epoch < 0 {
			epoch = now
		} else if now != epoch || !in {
			return errEndedElsewhere
		}
		batch, err := l.Next()
		if err != nil {
			return err
		}
		if batch == nil {
			finished = true
			return nil
		}
		// entries is set before the batch joins pass: a Close on another goroutine reaches the
		// batch only through pass, whose lock orders it after this write.
		batch.entries = newOwner()
		batch.own.moveTo(batch, pass)
		if err := body(batch); err != nil {
			return err
		}
	}
}

// Where the loader stands: its epoch, and whether one is under way (an error once it is closed).
func (l *DataLoader) epochState() (int64, bool, error) {
	epoch, err := with(l.ref(), func(h capi.DataLoader, e *string) int64 { return h.Epoch(e) })
	if err != nil {
		return 0, false, err
	}
	in, err := with(l.ref(), func(h capi.DataLoader, e *string) bool { return h.InEpoch(e) })
	return epoch, in, err
}
