package accelerate

import "errors"

// Break, returned by a ForEach body, ends the loop early without an error (like fs.SkipAll).
var Break = errors.New("accelerate: break out of ForEach")

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
	for {
		pass.closeAll()
		batch, err := l.Next()
		if err != nil {
			return err
		}
		if batch == nil {
			finished = true
			return nil
		}
		batch.own.moveTo(batch, pass)
		batch.entries = newOwner()
		if err := body(batch); err != nil {
			return err
		}
	}
}
