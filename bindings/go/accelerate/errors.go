// Package accelerate is the Go binding of accelerate, Hugging Face Accelerate's training runtime
// on libtorch: types with Close() and methods returning (T, error). Close what you create; a
// finalizer frees what is forgotten, but only when the garbage collector runs.
package accelerate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/accelerate-cpp/accelerate/go/internal/capi"
)

// Status is the library's acc_status.
type Status int

const (
	StatusOK              Status = capi.StatusOK
	StatusInvalidArgument Status = capi.StatusInvalidArgument
	StatusInvalidHandle   Status = capi.StatusInvalidHandle
	StatusNotInitialized  Status = capi.StatusNotInitialized
	StatusUnsupported     Status = capi.StatusUnsupported
	StatusOutOfMemory     Status = capi.StatusOutOfMemory
	StatusTimeout         Status = capi.StatusTimeout
	StatusAborted         Status = capi.StatusAborted
	StatusDistributed     Status = capi.StatusDistributed
	StatusIO              Status = capi.StatusIO
	StatusVersionMismatch Status = capi.StatusVersionMismatch
	StatusInternal        Status = capi.StatusInternal
)

func (s Status) String() string { return capi.AccelerateStatusName(capi.Acc_status(s)) }

// Error is a failed call: the status and the library's message. Match kinds with errors.Is against
// the sentinels below (errors.Is(err, accelerate.ErrTimeout)).
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("accelerate: %v: %s", e.Status, e.Message) }

// Is matches an *Error of the same status.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Status == e.Status
}

// Sentinels for errors.Is.
var (
	ErrInvalidArgument = &Error{Status: StatusInvalidArgument}
	ErrInvalidHandle   = &Error{Status: StatusInvalidHandle}
	ErrNotInitialized  = &Error{Status: StatusNotInitialized}
	ErrUnsupported     = &Error{Status: StatusUnsupported}
	ErrOutOfMemory     = &Error{Status: StatusOutOfMemory}
	ErrTimeout         = &Error{Status: StatusTimeout}
	ErrAborted         = &Error{Status: StatusAborted}
	ErrDistributed     = &Error{Status: StatusDistributed}
	ErrIO              = &Error{Status: StatusIO}
	ErrVersionMismatch = &Error{Status: StatusVersionMismatch}
	ErrInternal        = &Error{Status: StatusInternal}
)

// parseError reads the "code:message" the wrapper wrote in the failed call.
func parseError(s string) error {
	code, message, ok := strings.Cut(s, ":")
	n, err := strconv.Atoi(code)
	if !ok || err != nil {
		return &Error{Status: StatusInternal, Message: s}
	}
	return &Error{Status: Status(n), Message: message}
}

// nilArgument refuses a nil function or object where one is called later: at once, naming it, rather
// than as a nil dereference at its first call.
func nilArgument(name string) error {
	return &Error{Status: StatusInvalidArgument, Message: name + " is nil"}
}

// notNegative refuses a negative index by its value, as the Java and C# bindings do (the library
// would see it as a number near 2^64).
func notNegative(name string, value int) error {
	if value < 0 {
		return &Error{Status: StatusInvalidArgument, Message: name + " is negative: " + strconv.Itoa(value)}
	}
	return nil
}

func closedError(kind string) error {
	return &Error{Status: StatusInvalidHandle, Message: kind + " is closed"}
}

// call runs one wrapped method and turns its error text into an error.
func call[R any](f func(err *string) R) (R, error) {
	var e string
	r := f(&e)
	if e != "" {
		var zero R
		return zero, parseError(e)
	}
	return r, nil
}

func call0(f func(err *string)) error {
	var e string
	f(&e)
	if e != "" {
		return parseError(e)
	}
	return nil
}
