package lockfile

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestAcquireRelease(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "run directory")
	if err != nil {
		t.Fatal(err)
	}
	// A second Acquire, even in this process, is refused and names us.
	_, err = Acquire(dir, "run directory")
	var held *HeldError
	if !errors.As(err, &held) || !errors.Is(err, ErrLocked) || held.PID != os.Getpid() {
		t.Fatalf("second Acquire: %v", err)
	}
	for _, want := range []string{"run directory " + dir, fmt.Sprintf("process %d", os.Getpid()), Name} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	l2, err := Acquire(dir, "")
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
	var nilLock *Lock
	if err := nilLock.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(dir+"/missing", ""); err == nil {
		t.Fatal("Acquire of a missing directory succeeded")
	}
}

// childLock is the lock TestOtherProcess's child holds until it is killed.
var childLock *Lock

// TestOtherProcess holds the lock in a child process: Acquire here must name
// the child's pid, and succeed once the child is killed (the kernel drops
// the lock of a dead process).
func TestOtherProcess(t *testing.T) {
	if dir := os.Getenv("XMR_LOCKFILE_HOLD"); dir != "" {
		var err error
		// Kept reachable: an unreachable Lock's file is closed by the
		// garbage collector, and the lock goes with it.
		if childLock, err = Acquire(dir, ""); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("held")
		select {} // until killed
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOtherProcess$")
	cmd.Env = append(os.Environ(), "XMR_LOCKFILE_HOLD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "held\n" {
		t.Fatalf("child: %q", line)
	}
	_, err = Acquire(dir, "run directory")
	var held *HeldError
	if !errors.As(err, &held) || held.PID != cmd.Process.Pid {
		t.Fatalf("Acquire while the child %d holds it: %v", cmd.Process.Pid, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err := Acquire(dir, "run directory")
	if err != nil {
		t.Fatalf("Acquire after the holder died: %v", err)
	}
	l.Release()
}
