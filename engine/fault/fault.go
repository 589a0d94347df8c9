// Package fault classifies failures so every front door can map them to the
// same exit codes and messages: validation (bad input), connectivity (cannot
// reach or select a cluster), permission (RBAC), not found, conflict (another
// run holds the release), configuration (a key or secret input is missing), gate (a promotion gate
// refused the change).
//
// Errors keep their text; a class is attached with Wrap and read back with
// KindOf, which also recognises Kubernetes API status errors.
package fault

import (
	"errors"
	"fmt"
	"net"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Kind is the class of a failure.
type Kind int

// Failure classes, ordered by their exit codes.
const (
	General      Kind = 1
	Validation   Kind = 2
	Connectivity Kind = 3
	Permission   Kind = 4
	NotFound     Kind = 5
	// Conflict: another run holds the release (its lock did not come free
	// in time, or the inventory changed under this run).
	Conflict Kind = 6
	// Configuration: something the run needs from its operator is missing
	// or wrong (a decryption key, a secret input).
	Configuration Kind = 7
	// Gate: a promotion gate refused the change (the gating environments
	// do not run the commit, or are not healthy).
	Gate Kind = 8
)

// String names the class for logs and JSON.
func (k Kind) String() string {
	switch k {
	case Validation:
		return "validation"
	case Connectivity:
		return "connectivity"
	case Permission:
		return "permission"
	case NotFound:
		return "not-found"
	case Conflict:
		return "conflict"
	case Configuration:
		return "configuration"
	case Gate:
		return "gate"
	default:
		return "general"
	}
}

// ExitCode is the process exit code for the class (0 is never returned).
func (k Kind) ExitCode() int { return int(k) }

type classified struct {
	kind Kind
	err  error
}

func (c *classified) Error() string { return c.err.Error() }
func (c *classified) Unwrap() error { return c.err }

// Wrap attaches a class to err. A nil err stays nil.
func Wrap(kind Kind, err error) error {
	if err == nil {
		return nil
	}
	return &classified{kind: kind, err: err}
}

// Validationf, and friends, build a classified error from a message.
func Validationf(format string, args ...any) error {
	return Wrap(Validation, fmt.Errorf(format, args...))
}

// Gatef builds a promotion-gate refusal.
func Gatef(format string, args ...any) error {
	return Wrap(Gate, fmt.Errorf(format, args...))
}

// Connectivityf builds a connectivity error.
func Connectivityf(format string, args ...any) error {
	return Wrap(Connectivity, fmt.Errorf(format, args...))
}

// KindOf returns the class of err: the innermost explicit class wins over
// what the Kubernetes API status says; unknown errors are General.
func KindOf(err error) Kind {
	if err == nil {
		return 0
	}
	var c *classified
	if errors.As(err, &c) {
		return c.kind
	}
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return Permission
	case apierrors.IsNotFound(err):
		return NotFound
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return Validation
	case apierrors.IsConflict(err):
		return Conflict
	}
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) {
		return Connectivity
	}
	return General
}
