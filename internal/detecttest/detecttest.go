// Package detecttest gives tests the real detector: its weights fetched
// into the default cache the first time (with npm), loaded once per test
// binary. Under CI=true a detector that cannot be had fails the test;
// elsewhere it skips it with the reason.
package detecttest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/xmr-project/xmr/detect"
)

var (
	once sync.Once
	det  *detect.Detector
	err  error
)

// Detector returns the loaded detector, or ends t as the package comment
// says.
func Detector(t testing.TB) *detect.Detector {
	t.Helper()
	once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		dir, ferr := detect.Fetch(ctx, detect.DefaultCacheDir())
		if ferr != nil {
			err = ferr
			return
		}
		det, err = detect.Load(dir)
	})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the detector: %v", err)
		}
		t.Skipf("the detector is not available: %v", err)
	}
	return det
}
