// Command xmr is a cross-modal retrieval system: it generates a synthetic
// world, converts datasets and checkpoints, trains and evaluates the
// image-text matching models TERAN, TERN, SEAM and MEMBER, draws TERAN's
// and TERN's word-region alignments, and builds, searches and serves
// on-disk indexes of a collection.
//
// Run "xmr help" for the list of subcommands and "xmr CMD -h" for the help of
// one of them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/xmr-project/xmr/blas"
)

// command is one xmr subcommand. Each lives in its own file and registers
// itself from an init function.
type command struct {
	name     string // as typed on the command line
	summary  string // one line for "xmr help"
	usage    string // argument synopsis, e.g. "[flags] FILE"
	examples string // example invocations shown by -h
	// setFlags declares the command's flags; it may be nil.
	setFlags func(fs *flag.FlagSet)
	// run executes the command with the remaining positional arguments.
	run func(ctx context.Context, args []string) error
}

var commands = map[string]*command{}

// register adds c to the set of subcommands; it panics on a duplicate name,
// which is a programming error.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("xmr: duplicate command " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks an error caused by bad command-line use; main prints the
// command's usage after it.
var errUsage = errors.New("usage error")

// usageErrorf returns an error wrapping errUsage with a message.
func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// stdout is where commands print their results: os.Stdout, or a test's
// buffer (runMain sets it).
var stdout io.Writer = os.Stdout

// exitInterrupted is the exit code of a command stopped by SIGINT or
// SIGTERM (128 + SIGINT, as shells report it).
const exitInterrupted = 130

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain runs xmr with args (without the program name) and returns the exit
// code. It is separate from main so that tests can call it.
func runMain(args []string, out, stderr io.Writer) int {
	stdout = out
	// The log and the interrupt notice share stderr from two goroutines.
	errw := &lockedWriter{w: stderr}
	stderr = errw
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: logLevel()})))
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				printUsage(stdout, c, newFlagSet(c, stdout))
				return 0
			}
		}
		printHelp(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "xmr: unknown command %q; run \"xmr help\" for the list\n", args[0])
		return 2
	}
	fs := newFlagSet(c, stderr)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, c, fs)
			return 0
		}
		// The flag package has printed the error; add the usage.
		printUsage(stderr, c, fs)
		return 2
	}
	// The first SIGINT or SIGTERM cancels ctx: the command stops at its
	// next safe point. watchInterrupt then restores the default handling,
	// so that a second Ctrl-C ends the process at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	finish := watchInterrupt(ctx, stop, errw)
	// Deferred too, to run before stop when c.run panics: stop cancels
	// ctx, and the watcher must not take that for a signal.
	defer finish()
	warnSlowGEMM(c.name)
	err := c.run(ctx, fs.Args())
	finish()
	if err != nil {
		fmt.Fprintf(stderr, "xmr %s: %v\n", c.name, err)
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return exitInterrupted
		}
		if errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "run \"xmr %s -h\" for help\n", c.name)
			return 2
		}
		return 1
	}
	return 0
}

// interruptNotice is printed on stderr when the first SIGINT or SIGTERM
// arrives.
const interruptNotice = "xmr: interrupted; stopping at the next safe point (Ctrl-C again to quit now)"

// watchInterrupt waits, on a goroutine, for ctx to be cancelled by the
// first signal: it then calls stop, which restores the default handling of
// SIGINT and SIGTERM so that a second one kills the process, and prints
// interruptNotice on w. Call finish when the command returns: it ends the
// goroutine (printing nothing if no signal came) and waits for it, so that
// nothing is written to w after finish returns. Calling finish again does
// nothing.
func watchInterrupt(ctx context.Context, stop func(), w io.Writer) (finish func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(exited)
		select {
		case <-ctx.Done():
			stop()
			fmt.Fprintln(w, interruptNotice)
		case <-done:
		}
	}()
	return func() {
		once.Do(func() { close(done) })
		<-exited
	}
}

// lockedWriter serialises the writes of several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// interruptedError is the error of a command stopped by SIGINT or SIGTERM:
// msg says what was kept and how to go on; it wraps the context's error, so
// that runMain exits with exitInterrupted.
type interruptedError struct {
	msg string
	err error
}

func (e *interruptedError) Error() string { return e.msg }
func (e *interruptedError) Unwrap() error { return e.err }

func newFlagSet(c *command, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("xmr "+c.name, flag.ContinueOnError)
	fs.SetOutput(out)
	if c.setFlags != nil {
		c.setFlags(fs)
	}
	// main prints the usage itself: to stdout for -h, to stderr after an
	// error.
	fs.Usage = func() {}
	return fs
}

func printUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: xmr %s %s\n\n%s\n", c.name, c.usage, c.summary)
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintf(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	if c.examples != "" {
		fmt.Fprintf(w, "\nExamples:\n%s\n", strings.TrimRight(c.examples, "\n"))
	}
}

func printHelp(w io.Writer) {
	fmt.Fprintf(w, "xmr: cross-modal image-text retrieval (TERAN, TERN, SEAM, MEMBER)\n\nUsage: xmr COMMAND [flags] [args]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun \"xmr COMMAND -h\" for a command's flags and examples.\n")
}

// gemmBound are the long commands, whose time goes into matrix products:
// they warn at their start when the pure-Go GEMM computes those
// (warnSlowGEMM).
var gemmBound = map[string]bool{"train": true, "demo": true, "eval": true, "extract": true, "index": true, "bench": true}

// installOpenBLAS is the command that installs what package blas loads.
const installOpenBLAS = "sudo apt-get install -y libopenblas0"

// warnSlowGEMM logs one WARN line when command name is one of gemmBound
// and the pure-Go GEMM is in use: why, how much slower, and how to install
// OpenBLAS.
func warnSlowGEMM(name string) {
	if !gemmBound[name] {
		return
	}
	why, ok := blas.Fallback()
	if !ok {
		return
	}
	slog.Warn("the pure-Go GEMM is in use, not OpenBLAS: matrix products run 3-14x slower (0.07-0.36x OpenBLAS's speed, docs/benchmarks.md, \"gemm\")",
		"why", why, "install", installOpenBLAS)
}

// logLevel reads XMR_LOG (debug, info, warn, error); info by default.
func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("XMR_LOG"))); err != nil {
		return slog.LevelInfo
	}
	return l
}

// givenFlags returns the names of the flags that fs's command line set
// (none when fs is nil), so that a default can depend on whether the user
// chose a value.
func givenFlags(fs *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	if fs != nil {
		fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	}
	return given
}
