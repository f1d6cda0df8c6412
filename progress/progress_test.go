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
	for _, want := range []string{"msg=work", "done=4", "total=10", "items/s", "eta=", "info=\"loss 0.5\"", "msg=\"work done\"", "count=4"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, `msg="work done"`) != 1 {
		t.Errorf("summary logged %d times", strings.Count(out, `msg="work done"`))
	}
}
