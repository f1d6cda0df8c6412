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
	deadline time.Time // zero: none
	now      func() time.Time
}

// Option configures a Bar.
type Option func(*Bar)

// Deadline says that the work stops at t at the latest (a time budget),
// whatever is left of the total: the ETA shown is then the earlier of the
// rate's prediction and the time left to t, marked "(time budget)".
func Deadline(t time.Time) Option { return func(b *Bar) { b.deadline = t } }

// LogEvery is how often a Bar that is not on a terminal writes a log line.
var LogEvery = 10 * time.Second

// New starts a Bar for total units of work described by desc; unit names the
// units ("images", "pairs") for the throughput.
func New(desc string, total int64, unit string, opts ...Option) *Bar {
	b := &Bar{desc: desc, unit: unit, total: total, start: time.Now(), every: LogEvery, now: time.Now}
	for _, o := range opts {
		o(b)
	}
	b.lastLog = b.start
	if term.IsTerminal(int(os.Stderr.Fd())) && os.Getenv("CI") == "" {
		b.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetDescription(desc),
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString(unit),
			// With a deadline the ETA goes into the description (the
			// library's follows the total only).
			progressbar.OptionSetPredictTime(b.deadline.IsZero()),
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
		if !b.deadline.IsZero() {
			b.bar.Describe(b.descriptionLocked())
		}
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
		b.bar.Describe(b.descriptionLocked())
	}
}

// descriptionLocked is the terminal bar's text: the description, the
// extra text and, with a deadline, the ETA.
func (b *Bar) descriptionLocked() string {
	d := b.desc
	if b.extra != "" {
		d += " " + b.extra
	}
	if !b.deadline.IsZero() {
		d += " | " + b.etaLocked(b.now()) + " left"
	}
	return d
}

// etaLocked returns the predicted time to the end: the remaining units at
// the rate so far, or with a deadline, the earlier of that and the time
// left to the deadline (marked "(time budget)"); "?" before any rate.
func (b *Bar) etaLocked(now time.Time) string {
	el := now.Sub(b.start).Seconds()
	var rate float64
	if el > 0 {
		rate = float64(b.done) / el
	}
	byRate := time.Duration(-1)
	if rate > 0 && b.total > 0 {
		byRate = time.Duration(float64(b.total-b.done) / rate * float64(time.Second))
	}
	if !b.deadline.IsZero() {
		left := max(b.deadline.Sub(now), 0)
		if byRate < 0 || left < byRate {
			return left.Round(time.Second).String() + " (time budget)"
		}
	}
	if byRate < 0 {
		return "?"
	}
	return byRate.Round(time.Second).String()
}

// Finish ends the bar and logs a summary line, which gives the total too
// when the work stopped before it. A bar stopped before its total (a time
// budget, Ctrl-C) is left where it stopped, not filled.
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
		if b.done >= b.total {
			b.bar.Finish()
		} else {
			// Stopped early (a time budget): leave the bar where it is
			// rather than fill it.
			b.bar.Exit()
			fmt.Fprintln(os.Stderr)
		}
	}
	el := time.Since(b.start)
	args := []any{"count", b.done, "unit", b.unit, "elapsed", el.Round(time.Millisecond), "rate", fmt.Sprintf("%.1f %s/s", float64(b.done)/el.Seconds(), b.unit)}
	if b.done < b.total {
		// Stopped before the end (a time budget, Ctrl-C, an error): say
		// how far it got.
		args = append(args, "of", b.total)
	}
	slog.Info(b.desc+" done", args...)
}

func (b *Bar) logLocked(now time.Time) {
	el := now.Sub(b.start).Seconds()
	rate := float64(b.done) / el
	args := []any{"done", b.done, "total", b.total, "rate", fmt.Sprintf("%.1f %s/s", rate, b.unit), "eta", b.etaLocked(now)}
	if b.extra != "" {
		args = append(args, "info", b.extra)
	}
	slog.Info(b.desc, args...)
}
