package workers

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
)

// Group runs goroutines whose panics are not lost: the first one is raised
// again in the goroutine that calls Wait, so the recover of a front door
// (which turns a panic into one redacted line) sees a panic of any work it
// started, where a panic on a goroutine of its own would end the process
// with a stack trace past every redactor. The zero value is ready to use.
type Group struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	panic *Panic
}

// Panic is a panic of a Group's goroutine, raised again by Wait.
type Panic struct{ Value any }

func (p *Panic) Error() string { return fmt.Sprint(p.Value) }

// Go runs fn on a goroutine of the group.
func (g *Group) Go(fn func()) {
	g.wg.Go(func() {
		defer func() {
			if r := recover(); r != nil {
				g.mu.Lock()
				if g.panic == nil {
					if p, ok := r.(*Panic); ok {
						g.panic = p
					} else {
						g.panic = &Panic{Value: r}
					}
				}
				g.mu.Unlock()
			}
		}()
		fn()
	})
}

// Wait waits for every goroutine of the group, then raises the first
// panic one of them had, if any.
func (g *Group) Wait() {
	g.wg.Wait()
	g.mu.Lock()
	p := g.panic
	g.mu.Unlock()
	if p != nil {
		panic(p)
	}
}

// ErrGroup is errgroup.Group whose panics are not lost: a panic of a
// goroutine cancels the group's context like an error does, and Wait
// raises it again in its caller (see Group). errgroup itself lets a panic
// end the process.
type ErrGroup struct {
	g     *errgroup.Group
	mu    sync.Mutex
	panic *Panic
}

// WithContext is errgroup.WithContext for an ErrGroup.
func WithContext(ctx context.Context) (*ErrGroup, context.Context) {
	g, gctx := errgroup.WithContext(ctx)
	return &ErrGroup{g: g}, gctx
}

// SetLimit is errgroup.Group.SetLimit.
func (g *ErrGroup) SetLimit(n int) { g.g.SetLimit(n) }

// Go is errgroup.Group.Go.
func (g *ErrGroup) Go(fn func() error) {
	g.g.Go(func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				p, ok := r.(*Panic)
				if !ok {
					p = &Panic{Value: r}
				}
				g.mu.Lock()
				if g.panic == nil {
					g.panic = p
				}
				g.mu.Unlock()
				err = p
			}
		}()
		return fn()
	})
}

// Wait is errgroup.Group.Wait, then raises the first panic of a goroutine.
func (g *ErrGroup) Wait() error {
	err := g.g.Wait()
	g.mu.Lock()
	p := g.panic
	g.mu.Unlock()
	if p != nil {
		panic(p)
	}
	return err
}
