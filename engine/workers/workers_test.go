package workers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/opmodel/pipeline/engine/workers"
)

func TestCountIsBoundedByWorkAndLimit(t *testing.T) {
	assert.Equal(t, workers.Count(3, 8), 3)
	assert.Equal(t, workers.Count(30, 4), 4)
	assert.Equal(t, workers.Count(0, 4), 1)
	assert.Assert(t, workers.Count(1000, 0) >= 1)
}

// Run calls do once for every index, on as many goroutines as asked.
func TestRunCallsEveryIndexOnce(t *testing.T) {
	const n = 1000
	var calls [n]atomic.Int32
	workers.Run(t.Context(), 4, n, func(i int) { calls[i].Add(1) })
	for i := range n {
		assert.Equal(t, calls[i].Load(), int32(1), "index %d", i)
	}
}

// Once ctx ends, Run hands out no more indexes.
func TestRunStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var calls atomic.Int32
	workers.Run(ctx, 1, 100, func(i int) {
		calls.Add(1)
		if i == 9 {
			cancel()
		}
	})
	assert.Equal(t, calls.Load(), int32(10))
}

// Each returns the error of the lowest index that failed, as a loop would,
// and gives every goroutine its own state from setup.
func TestEachReturnsTheFirstErrorInIndexOrder(t *testing.T) {
	var setups atomic.Int32
	err := workers.Each(t.Context(), 3, 50, func(context.Context, int) (int, error) {
		return int(setups.Add(1)), nil
	}, func(_ context.Context, _ int, i int) error {
		if i == 7 || i == 30 {
			return fmt.Errorf("unit %d", i)
		}
		return nil
	})
	assert.Error(t, err, "unit 7")
	assert.Assert(t, setups.Load() <= 3)

	err = workers.Each(t.Context(), 2, 4, func(context.Context, int) (int, error) {
		return 0, errors.New("no state")
	}, func(context.Context, int, int) error { return nil })
	assert.Error(t, err, "no state", "a unit no goroutine could take fails the call")
}

// A panic on a worker is raised again in the caller's goroutine, where a
// front door's recover sees it, instead of ending the process.
func TestAWorkersPanicReachesTheCaller(t *testing.T) {
	for name, run := range map[string]func(){
		"Each": func() {
			_ = workers.Each(t.Context(), 2, 4, func(context.Context, int) (int, error) { return 0, nil },
				func(_ context.Context, _ int, i int) error {
					if i == 3 {
						panic("boom in unit 3")
					}
					return nil
				})
		},
		"Run": func() {
			workers.Run(t.Context(), 2, 4, func(i int) {
				if i == 2 {
					panic("boom in unit 2")
				}
			})
		},
		"Group": func() {
			var g workers.Group
			g.Go(func() {})
			g.Go(func() { panic("boom in a goroutine") })
			g.Wait()
		},
	} {
		t.Run(name, func(t *testing.T) {
			var got any
			func() {
				defer func() { got = recover() }()
				run()
			}()
			p, ok := got.(*workers.Panic)
			if !ok || !strings.HasPrefix(p.Error(), "boom in") {
				t.Fatalf("recovered %v, want the worker's panic", got)
			}
		})
	}
}
