package countdown

import (
	"context"
	"testing"
)

// TestCountdown checks that Err is nil n times, then context.Canceled.
func TestCountdown(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		c := New(n)
		for i := 0; i < n; i++ {
			if err := c.Err(); err != nil {
				t.Fatalf("n=%d: call %d: %v", n, i+1, err)
			}
		}
		for i := 0; i < 2; i++ {
			if err := c.Err(); err != context.Canceled {
				t.Fatalf("n=%d: call %d: %v, want context.Canceled", n, n+i+1, err)
			}
		}
	}
}
