package progress

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestNilBarIsSafe(t *testing.T) {
	var b *Bar
	b.Add(3)
	b.Describe("x")
	b.Finish()
}

// TestLogLines checks the non-terminal mode: periodic log lines with the
// count, rate and ETA, and a summary at the end.
func TestLogLines(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(prev)
	old := LogEvery
	LogEvery = time.Nanosecond
	defer func() { LogEvery = old }()

	b := New("work", 10, "items") // tests never run on a terminal
	b.Describe("loss 0.5")
	time.Sleep(time.Millisecond)
	b.Add(4)
	b.Finish()
	b.Finish() // idempotent
	out := buf.String()
	for _, want := range []string{"msg=work", "done=4", "total=10", "items/s", "eta=", "info=\"loss 0.5\"", "msg=\"work done\"", "count=4", "of=10"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, `msg="work done"`) != 1 {
		t.Errorf("summary logged %d times", strings.Count(out, `msg="work done"`))
	}
}

// TestETA checks the predicted time left: by the rate, and under a time
// budget the time left to the deadline when that comes first (a 5-minute
// budget on a run whose epochs would take an hour says 5m, not 1h).
func TestETA(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		deadline time.Duration // after start; 0: none
		done     int64
		elapsed  time.Duration
		want     string
	}{
		{"no rate yet", 0, 0, time.Second, "?"},
		{"by rate", 0, 10, 10 * time.Second, "1m30s"},
		{"budget first", 5 * time.Minute, 10, time.Minute, "4m0s (time budget)"},
		{"rate first", time.Hour, 50, 10 * time.Second, "10s"},
		{"budget, no rate yet", 5 * time.Minute, 0, time.Minute, "4m0s (time budget)"},
		{"budget spent", 5 * time.Minute, 10, 6 * time.Minute, "0s (time budget)"},
	}
	for _, c := range cases {
		var opts []Option
		if c.deadline > 0 {
			opts = append(opts, Deadline(start.Add(c.deadline)))
		}
		b := New("train", 100, "it", opts...)
		b.start = start
		b.done = c.done
		if got := b.etaLocked(start.Add(c.elapsed)); got != c.want {
			t.Errorf("%s: ETA %q, want %q", c.name, got, c.want)
		}
	}
	b := New("train", 100, "it", Deadline(start.Add(5*time.Minute)))
	b.start, b.done, b.extra = start, 10, "loss 0.5"
	b.now = func() time.Time { return start.Add(time.Minute) }
	if got := b.descriptionLocked(); got != "train loss 0.5 | 4m0s (time budget) left" {
		t.Errorf("terminal description %q", got)
	}
}

// TestSummaryOfComplete checks that a bar that reached its total logs no
// "of": only work stopped before its total says how far it got.
func TestSummaryOfComplete(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(prev)
	b := New("all", 3, "items")
	b.Add(3)
	b.Finish()
	if out := buf.String(); !strings.Contains(out, `msg="all done" count=3`) || strings.Contains(out, "of=") {
		t.Errorf("summary of a complete bar:\n%s", out)
	}
}
