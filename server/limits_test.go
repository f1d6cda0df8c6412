package server

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// TestUploadLimitsDoNotWrap: the largest caps an Options can hold work as
// caps: an upload cap of 2^63-1 made every upload an "empty upload" (the
// reader's limit, one past the cap, wrapped to a negative count), and one
// less made every upload a 413 (the form headers' room wrapped).
func TestUploadLimitsDoNotWrap(t *testing.T) {
	for _, max := range []int64{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - 64<<10, MaxUploadBytesCeiling} {
		_, ts := newServer(t, &Options{ImageQuery: fakeImageQuery(t), MaxUploadBytes: max, UploadPixelBudget: math.MaxInt64})
		code, body := upload(t, ts.Client(), ts.URL+"/api/search/upload?k=3", "image/png", []byte("PNG..."))
		if code != 200 || !bytes.Contains(body, []byte(`"image-to-text"`)) {
			t.Errorf("MaxUploadBytes %d: %d %s, want 200", max, code, body)
		}
		code, body = upload(t, ts.Client(), ts.URL+"/api/search/upload", "image/png", nil)
		if code != 400 || !bytes.Contains(body, []byte("empty upload")) {
			t.Errorf("MaxUploadBytes %d, an empty body: %d %s, want 400", max, code, body)
		}
	}
}

// TestPixelBudgetDoesNotWrap: a budget near the largest int64 still makes
// an image wait for the pixels it lacks (held + wanted wrapped negative,
// and both were granted).
func TestPixelBudgetDoesNotWrap(t *testing.T) {
	b := newPixelBudget(math.MaxInt64)
	if err := b.acquire(context.Background(), math.MaxInt64-5); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := b.acquire(ctx, 10); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("10 more pixels than the budget: %v, want a wait that ends with the context (held %d)", err, b.inUse())
	}
	if err := b.acquire(context.Background(), 5); err != nil {
		t.Errorf("the 5 pixels left: %v", err)
	}
	b.release(5)
	b.release(math.MaxInt64 - 5)
	if b.inUse() != 0 {
		t.Errorf("%d pixels held after releasing all", b.inUse())
	}
}
