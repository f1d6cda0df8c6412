// Package lockfile guards a directory against a second writer: Acquire takes
// an exclusive advisory lock (flock(2)) on a lock file inside it and records
// the holder's process id there, so that the loser of a race learns who
// holds the directory. The kernel drops the lock when the holder exits, even
// by kill -9, so a stale lock file never blocks anyone.
//
// Training run directories, synthetic-world directories, index
// directories (while a writer is open) and the data sets that xmr extract
// writes use it.
package lockfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/xmr-project/xmr/internal/infile"
)

// Name is the lock file's name inside a locked directory.
const Name = "xmr.lock"

// ErrLocked is wrapped by the error of Acquire when another holder has the
// lock.
var ErrLocked = errors.New("locked by another process")

// HeldError is the error of Acquire when the lock is held: it names the
// directory and, when the holder recorded it, the holder's process id.
type HeldError struct {
	// Dir is the locked directory.
	Dir string
	// PID is the holder's process id, 0 when unknown.
	PID int
	// What says what the directory is ("run directory"), for the message.
	What string
}

// Error words the conflict.
func (e *HeldError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = fmt.Sprintf("process %d", e.PID)
	}
	what := e.What
	if what == "" {
		what = "directory"
	}
	return fmt.Sprintf("%s %s is in use by %s (lock %s): wait for it to finish or stop it", what, e.Dir, holder, filepath.Join(e.Dir, Name))
}

// Unwrap returns ErrLocked.
func (e *HeldError) Unwrap() error { return ErrLocked }

// Lock is a held lock. Release it when done; the lock file stays. Keep it
// reachable until then: when the garbage collector finds a Lock
// unreachable, it closes its file, and the lock goes with it.
type Lock struct {
	f *os.File
}

// Acquire locks dir (which must exist) without waiting: it returns a
// *HeldError wrapping ErrLocked when another process, or another Acquire of
// this process, holds it. what names the directory's role in that error
// ("run directory").
func Acquire(dir, what string) (*Lock, error) {
	path := filepath.Join(dir, Name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if held {
		pid := readPID(path)
		f.Close()
		return nil, &HeldError{Dir: dir, PID: pid, What: what}
	}
	// Record who holds it; a reader may see the file empty for a moment,
	// which reads as an unknown holder.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release gives the lock up. It is safe to call on a nil Lock and more than
// once.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := unlock(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// readPID returns the process id recorded in the lock file, 0 if none.
func readPID(path string) int {
	b, err := infile.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
