package main

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/internal/sysmem"
)

// TestMain runs the package's tests as if the machine's memory were not
// known, so that no test of a command that extracts photos depends on the
// memory of the machine that runs it (two workers on 50-megapixel photos
// are estimated at 2.6 GiB); the tests of the check pretend a figure
// (pretendMemory).
func TestMain(m *testing.M) {
	availableMemory = func() (sysmem.Memory, bool) { return sysmem.Memory{}, false }
	os.Exit(m.Run())
}

// pretendMemory makes availableMemory report avail bytes (ok false: not
// known) until the test ends.
func pretendMemory(t *testing.T, avail float64, ok bool) {
	t.Helper()
	saved := availableMemory
	t.Cleanup(func() { availableMemory = saved })
	availableMemory = func() (sysmem.Memory, bool) { return sysmem.Memory{Available: avail, Total: 2 * avail}, ok }
}

// TestFitExtractWorkers: a --workers whose memory estimate exceeds what
// the machine has is a usage error with the numbers, unless it is the
// default, which is lowered to what fits.
func TestFitExtractWorkers(t *testing.T) {
	const gib = 1 << 30
	_, per := extractMemory(1, 50_000_000)
	if per < 1*gib || per > 1.25*gib {
		t.Fatalf("a worker on 50-megapixel photos is estimated at %s, want about 1.1 GiB", sysmem.Format(per))
	}
	for _, c := range []struct {
		name      string
		avail     float64
		known     bool
		n, def    int
		maxPixels int64
		want      int    // workers returned, when no error
		err       string // the usage error, when refused
	}{
		{name: "memory unknown", avail: 0, known: false, n: 16, def: 2, maxPixels: 50_000_000, want: 16},
		{name: "fits", avail: 64 * gib, known: true, n: 16, def: 2, maxPixels: 50_000_000, want: 16},
		{name: "too many", avail: 4 * gib, known: true, n: 4, def: 1, maxPixels: 50_000_000,
			err: "--workers 4: extracting 4 photos at once needs about 4.8 GiB (256 MiB + 4 x 1.1 GiB a worker, for photos of up to --max-pixels 50000000), but this machine has 4.0 GiB available: lower --workers (at most 3 fit) or --max-pixels"},
		{name: "smaller photos fit", avail: 4 * gib, known: true, n: 4, def: 1, maxPixels: 12_000_000, want: 4},
		{name: "not even one", avail: 1 * gib, known: true, n: 2, def: 1, maxPixels: 50_000_000,
			err: "but this machine has 1.0 GiB available: lower --max-pixels: not even one worker fits"},
		{name: "the default is lowered", avail: 4 * gib, known: true, n: 8, def: 8, maxPixels: 50_000_000, want: 3},
		{name: "the default is lowered to 1 at least", avail: 1 * gib, known: true, n: 8, def: 8, maxPixels: 50_000_000, want: 1},
		{name: "cgroup limit below the usage", avail: -1 * gib, known: true, n: 2, def: 1, maxPixels: 50_000_000,
			err: "lower --max-pixels: not even one worker fits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pretendMemory(t, c.avail, c.known)
			got, err := fitExtractWorkers(c.n, c.def, c.maxPixels)
			switch {
			case c.err == "" && (err != nil || got != c.want):
				t.Errorf("fitExtractWorkers(%d, %d, %d) = %d, %v; want %d", c.n, c.def, c.maxPixels, got, err, c.want)
			case c.err != "" && (err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.err)):
				t.Errorf("fitExtractWorkers(%d, %d, %d) = %d, %v; want a usage error containing %q", c.n, c.def, c.maxPixels, got, err, c.err)
			}
		})
	}
}

// TestExtractWorkersMemoryCLI: xmr extract and xmr index --images refuse
// an explicit --workers that the (pretended) memory cannot hold with exit
// 2, before reading any photo or model.
func TestExtractWorkersMemoryCLI(t *testing.T) {
	_, per := extractMemory(1, 50_000_000)
	pretendMemory(t, extractBaseMemory+1.5*per, true) // one worker fits
	n := strconv.Itoa(4 * runtime.NumCPU())           // allowed per CPU, not the default
	photos, dir := t.TempDir(), t.TempDir()
	for _, args := range [][]string{
		{"extract", "--images", photos, "--out", filepath.Join(dir, "out"), "--workers", n},
		{"index", "--checkpoint", filepath.Join(dir, "none.safetensors"), "--images", photos, "--out", filepath.Join(dir, "ix"), "--workers", n},
	} {
		_, stderr, code := run(t, args...)
		want := "--workers " + n + ": extracting " + n + " photos at once needs about "
		if code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "a worker, for photos of up to --max-pixels 50000000), but this machine has ") ||
			!strings.Contains(stderr, "lower --workers (at most 1 fit) or --max-pixels") {
			t.Errorf("xmr %s: exit %d, stderr:\n%s\nwant exit 2 and %q with the per-worker figure and the memory available", strings.Join(args, " "), code, stderr, want)
		}
	}
}
