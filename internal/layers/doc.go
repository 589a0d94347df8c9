// Package layers holds no code: its test checks that the project's
// packages import only downwards — front doors → pipeline → the
// packages below it → engine — as CONTRIBUTING's picture draws them.
package layers
