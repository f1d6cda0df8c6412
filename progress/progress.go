// Package progress reports the progress of long work: a progress bar with
// throughput and ETA when stderr is a terminal, periodic log lines otherwise.
package progress

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Bar tracks work of a known total. Its zero value is not usable; create one
// with New. A nil *Bar ignores every call, so callers need no checks.
type Bar struct {
	mu       sync.Mutex
	desc     string
	unit     string
	total    int64
	done     int64
	start    time.Time
	lastLog  time.Time
	every    time.Duration
	bar      *progressbar.ProgressBar
	extra    string
	finished bool
}

// LogEvery is how often a Bar that is not on a terminal writes a log line.
var LogEvery = 10 * time.Second

// New starts a Bar for total units of work described by desc; unit names the
// units ("images", "pairs") for the throughput.
func New(desc string, total int64, unit string) *Bar {
	b := &Bar{desc: desc, unit: unit, total: total, start: time.Now(), every: LogEvery}
	b.lastLog = b.start
	if term.IsTerminal(int(os.Stderr.Fd())) && os.Getenv("CI") == "" {
		b.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetDescription(desc),
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString(unit),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(os.Stderr) }),
		)
	}
	return b
}

// Add records n more units done.
func (b *Bar) Add(n int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	if b.bar != nil {
		b.bar.Add64(n)
		return
	}
	if now := time.Now(); now.Sub(b.lastLog) >= b.every {
		b.lastLog = now
		b.logLocked(now)
	}
}

// Describe sets extra text (e.g. the current loss) shown after the
// description.
func (b *Bar) Describe(extra string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.extra = extra
	if b.bar != nil {
		b.bar.Describe(b.desc + " " + extra)
	}
}

// Finish marks the work complete and logs a summary line.
func (b *Bar) Finish() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.finished = true
	if b.bar != nil {
		b.bar.Finish()
	}
	el := time.Since(b.start)
	slog.Info(b.desc+" done", "count", b.done, "unit", b.unit, "elapsed", el.Round(time.Millisecond), "rate", fmt.Sprintf("%.1f %s/s", float64(b.done)/el.Seconds(), b.unit))
}

func (b *Bar) logLocked(now time.Time) {
	el := now.Sub(b.start).Seconds()
	rate := float64(b.done) / el
	eta := "?"
	if rate > 0 && b.total > 0 {
		eta = (time.Duration(float64(b.total-b.done)/rate) * time.Second).Round(time.Second).String()
	}
	args := []any{"done", b.done, "total", b.total, "rate", fmt.Sprintf("%.1f %s/s", rate, b.unit), "eta", eta}
	if b.extra != "" {
		args = append(args, "info", b.extra)
	}
	slog.Info(b.desc, args...)
}
