// Package countdown provides a context for testing cancellation: it
// reports itself cancelled from a chosen check on, so that a test can stop
// a function at each of its checks in turn.
package countdown

import (
	"context"
	"sync/atomic"
)

// Context is a context whose Err returns nil for its first n calls and
// context.Canceled from the (n+1)-th on. Its Done channel never closes:
// it serves code that polls Err.
type Context struct {
	context.Context
	left atomic.Int64
}

// New returns a Context that is cancelled from the (n+1)-th call of Err
// on.
func New(n int) *Context {
	c := &Context{Context: context.Background()}
	c.left.Store(int64(n))
	return c
}

// Err returns context.Canceled once the countdown has run out.
func (c *Context) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}
