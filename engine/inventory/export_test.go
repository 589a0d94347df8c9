package inventory

import "errors"

// IsCorrupt reports whether err is (or wraps) a *CorruptError.
func IsCorrupt(err error) bool {
	var c *CorruptError
	return errors.As(err, &c)
}

// IsConflict reports whether err is a concurrent-write conflict.
func IsConflict(err error) bool {
	var c *ConflictError
	return errors.As(err, &c)
}
