package main

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/jpeg"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/extract"
	"github.com/xmr-project/xmr/server"
)

// TestDecodeUpload: an upload's JPEG of more scans than
// extract.MaxJPEGScans is a bad image (400) naming its scans; a decode
// whose request's context is done returns the context's error, for the
// server to answer (503 or 499), not a bad image.
func TestDecodeUpload(t *testing.T) {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, image.NewGray(image.Rect(0, 0, 16, 16)), nil); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	i := bytes.LastIndex(b, []byte{0xFF, 0xDA})
	hostile := append([]byte(nil), b[:i]...)
	for range extract.MaxJPEGScans + 1 {
		hostile = append(hostile, b[i:len(b)-2]...)
	}
	hostile = append(hostile, 0xFF, 0xD9)
	_, err := decodeUpload(context.Background(), hostile, extract.Limits{})
	if !errors.Is(err, server.ErrBadImage) || !strings.Contains(err.Error(), "too many JPEG scans") {
		t.Errorf("an upload of %d scans: %v, want a bad image naming its scans", extract.MaxJPEGScans+1, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = decodeUpload(ctx, b, extract.Limits{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, server.ErrBadImage) {
		t.Errorf("an upload whose context is cancelled: %v, want context.Canceled and no bad image", err)
	}
	if p, err := decodeUpload(context.Background(), b, extract.Limits{}); err != nil || p.Width != 16 {
		t.Errorf("a 16x16 JPEG: %v", err)
	}
}
