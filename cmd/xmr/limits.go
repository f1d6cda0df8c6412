package main

import (
	"fmt"
	"log/slog"
	"runtime"

	"github.com/xmr-project/xmr/internal/sysmem"
)

// maxWorkersPerCPU bounds every --workers flag: more goroutines than this
// per CPU only add memory (each extract worker holds a decoded photo and
// the detector's activations: 100,000 workers took 8 GB and ran 5 times
// slower than 2).
const maxWorkersPerCPU = 4

// checkWorkers validates a --workers flag: 1 to maxWorkersPerCPU times the
// CPUs, or also 0 where zeroMeansAll (one per CPU).
func checkWorkers(n int, zeroMeansAll bool) error {
	limit := maxWorkersPerCPU * runtime.NumCPU()
	if (n >= 1 && n <= limit) || (n == 0 && zeroMeansAll) {
		return nil
	}
	zero := ""
	if zeroMeansAll {
		zero = ", or 0 for one per CPU"
	}
	return usageErrorf("--workers %d: want 1 to %d (%d per CPU of this machine's %d)%s", n, limit, maxWorkersPerCPU, runtime.NumCPU(), zero)
}

// The memory of photo extraction (xmr extract, xmr index --images): what
// the process holds whatever its workers, and what each worker adds: the
// detector's activations on its 512x512 input, and the photo it decodes,
// which at worst is a 16-bit PNG (image.RGBA64, 8 bytes a pixel) beside
// its 8-bit RGB copy (3 bytes a pixel), twice over for the garbage
// collector's headroom (GOGC=100). Measured peak RSS (/usr/bin/time -v,
// xmr extract --images DIR --workers N) on an AMD EPYC with 2 CPUs:
//
//	20 Flickr8k photos (about 500x375): 344 to 422 MiB with 1 worker,
//	  579 to 657 MiB with 4: 52 to 104 MiB a worker, about 240 MiB besides;
//	4 PNGs of 8000x6250 = 50 megapixels (the default --max-pixels), 16-bit:
//	  1416 MiB with 1 worker, 2486 MiB with 2: 21.4 to 22.5 bytes a pixel;
//	  the same 8-bit: 729 and 1150 MiB (8.8 bytes a pixel); as a JPEG
//	  (4:2:0): 750 MiB with 1 worker, 1205 MiB with 4.
//
// The constants round those up.
const (
	extractBaseMemory    = 256 << 20
	extractWorkerMemory  = 128 << 20 // besides the photo
	extractBytesPerPixel = 22
)

// extractMemory is the estimate of photo extraction with workers workers
// and photos of up to maxPixels pixels: in all, and per worker.
func extractMemory(workers int, maxPixels int64) (total, perWorker float64) {
	perWorker = extractWorkerMemory + extractBytesPerPixel*float64(maxPixels)
	return extractBaseMemory + float64(workers)*perWorker, perWorker
}

// availableMemory reads what the machine can give this process; ok is
// false where that cannot be known. Tests replace it.
var availableMemory = sysmem.Read

// fitExtractWorkers bounds the --workers n of a photo extraction by the
// memory available, for photos of up to maxPixels pixels (--max-pixels).
// A value the estimate (extractMemory) does not fit is a usage error
// naming the estimate, the per-worker figure and the memory available,
// unless it is the flag's default def: that is lowered to what fits (at
// least 1), with a log line. It returns the workers to run.
func fitExtractWorkers(n, def int, maxPixels int64) (int, error) {
	mem, ok := availableMemory()
	if !ok || n < 1 || maxPixels <= 0 {
		return n, nil
	}
	total, per := extractMemory(n, maxPixels)
	if total <= mem.Available {
		return n, nil
	}
	fit := int((mem.Available - extractBaseMemory) / per)
	if n == def {
		lowered := max(fit, 1)
		slog.Info("fewer extraction workers than CPUs, for memory", "workers", lowered, "default", def,
			"per_worker", sysmem.Format(per), "available", sysmem.Format(mem.Available), "max_pixels", maxPixels)
		return lowered, nil
	}
	advice := "lower --max-pixels: not even one worker fits"
	if fit >= 1 {
		advice = fmt.Sprintf("lower --workers (at most %d fit) or --max-pixels", fit)
	}
	return 0, usageErrorf("--workers %d: extracting %d photos at once needs about %s (%s + %d x %s a worker, for photos of up to --max-pixels %d), but this machine has %s available: %s",
		n, n, sysmem.Format(total), sysmem.Format(extractBaseMemory), n, sysmem.Format(per), maxPixels, sysmem.Format(mem.Available), advice)
}
