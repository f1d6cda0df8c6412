// Command testreport is scripts/test's reader of `go test -json`: it
// prints what go test prints without -json, records the tests that
// skipped and why, and at the end of the suite lists them, so that a run
// shows what it did not check; under CI=true it fails the suite on a skip
// that the allow-list of scripts/test does not name.
//
// Filter (one per go test run):
//
//	go test -json ARGS | testreport -run LABEL -skips FILE [-quiet]
//
// reads go test's JSON events on stdin and writes to stdout what go test
// writes without -json: an "ok" line per passing package, the output of
// the failing tests and packages, build errors. Each skipped test is
// appended to FILE (a JSON line: run, package, test, reason). -quiet
// records the skips and prints nothing (for output already printed, such
// as `go tool test2json` of a -test.v run).
//
// Summary (once, at the end of the suite):
//
//	testreport -summary -skips FILE [-allow REGEXP]... [-ci]
//
// prints every recorded skip as "SKIP package Test: reason (file:line)",
// by run, marking those whose reason no -allow pattern matches. With -ci
// it exits 1 when there is any such skip.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // of build-output and build-fail events
}

// skip is one skipped test, as recorded in the skips file.
type skip struct {
	Run     string `json:"run"`
	Package string `json:"package"`
	Test    string `json:"test"`
	Reason  string `json:"reason"`
}

// allowList is a repeatable -allow flag.
type allowList []*regexp.Regexp

func (a *allowList) String() string { return fmt.Sprint(*a) }

func (a *allowList) Set(s string) error {
	re, err := regexp.Compile(s)
	if err != nil {
		return err
	}
	*a = append(*a, re)
	return nil
}

// match returns the first pattern that matches reason, or "".
func (a allowList) match(reason string) string {
	for _, re := range a {
		if re.MatchString(reason) {
			return re.String()
		}
	}
	return ""
}

func main() {
	var (
		run     = flag.String("run", "", "the name of this go test run, for the summary")
		skips   = flag.String("skips", "", "the `FILE` the skipped tests are appended to (filter) or read from (summary)")
		summary = flag.Bool("summary", false, "list the recorded skips instead of filtering go test's output")
		ci      = flag.Bool("ci", false, "with -summary: exit 1 on a skip that no -allow pattern matches")
		quiet   = flag.Bool("quiet", false, "record the skips only; print nothing")
		allow   allowList
	)
	flag.Var(&allow, "allow", "with -summary: a `REGEXP` matching the reason of an allowed skip (repeatable)")
	flag.Parse()
	if *skips == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: testreport -run LABEL -skips FILE [-quiet] < go-test.json\n       testreport -summary -skips FILE [-allow REGEXP]... [-ci]")
		os.Exit(2)
	}
	if *summary {
		recorded, err := readSkips(*skips)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(1)
		}
		if bad := printSummary(os.Stdout, recorded, allow, *ci); bad > 0 && *ci {
			os.Exit(1)
		}
		return
	}
	out := io.Writer(os.Stdout)
	if *quiet {
		out = io.Discard
	}
	found, err := filter(os.Stdin, out, *run)
	if werr := appendSkips(*skips, found); err == nil {
		err = werr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
}

// testState is what one test has printed, and whether it has ended.
type testState struct {
	out   []string
	ended bool
	fail  bool
}

// pkgState is one package's output, held until the package ends, as go
// test holds it when it runs several packages.
type pkgState struct {
	out   []string // output outside any test
	tests map[string]*testState
	order []string // tests in the order they started
}

func (p *pkgState) test(name string) *testState {
	t := p.tests[name]
	if t == nil {
		t = &testState{}
		p.tests[name] = t
		p.order = append(p.order, name)
	}
	return t
}

// filter reads go test's JSON events from r and writes to w what go test
// writes without -json; it returns the tests that skipped.
func filter(r io.Reader, w io.Writer, run string) ([]skip, error) {
	pkgs := map[string]*pkgState{}
	var pkgOrder []string
	var skips []skip
	failed := false
	get := func(name string) *pkgState {
		p := pkgs[name]
		if p == nil {
			p = &pkgState{tests: map[string]*testState{}}
			pkgs[name] = p
			pkgOrder = append(pkgOrder, name)
		}
		return p
	}
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			var ev event
			if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &ev) != nil {
				io.WriteString(w, line) // not an event: as it came
			} else {
				switch {
				case ev.Action == "build-output":
					io.WriteString(w, ev.Output)
				case ev.Action == "build-fail":
				case ev.Package == "":
					io.WriteString(w, ev.Output)
				case ev.Test == "":
					p := get(ev.Package)
					switch ev.Action {
					case "output":
						p.out = append(p.out, ev.Output)
					case "pass", "skip", "fail":
						writePackage(w, p, ev.Action == "fail")
						failed = failed || ev.Action == "fail"
						delete(pkgs, ev.Package)
					}
				default:
					t := get(ev.Package).test(ev.Test)
					switch ev.Action {
					case "output":
						t.out = append(t.out, ev.Output)
					case "pass", "fail", "skip":
						t.ended, t.fail = true, ev.Action == "fail"
					}
					if ev.Action == "skip" {
						skips = append(skips, skip{Run: run, Package: ev.Package, Test: ev.Test, Reason: skipReason(t.out)})
					}
					if ev.Action == "pass" || ev.Action == "skip" {
						t.out = nil // never printed: go test prints failed tests only
					}
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return skips, err
		}
	}
	// Packages that never ended (go test killed): what they printed.
	for _, name := range pkgOrder {
		if p, ok := pkgs[name]; ok {
			writePackage(w, p, true)
			failed = true
		}
	}
	if failed {
		io.WriteString(w, "FAIL\n") // go test's last line when a package failed
	}
	return skips, nil
}

// writePackage writes what go test writes for a package that ended: its
// summary line when it passed (or had no tests); the output of its failed
// and unfinished tests (a panic, a timeout), then its own, when it failed.
func writePackage(w io.Writer, p *pkgState, failed bool) {
	if !failed {
		for _, l := range p.out {
			if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "?") {
				io.WriteString(w, l)
			}
		}
		return
	}
	for _, name := range p.order {
		if t := p.tests[name]; t.fail || !t.ended {
			writeTest(w, name, t.out)
		}
	}
	for _, l := range p.out {
		io.WriteString(w, l)
	}
}

// writeTest writes a failed test's output as go test does without -v:
// its "--- FAIL" line first, then what it logged, a subtest indented
// under its parent; test2json's "=== RUN" (PAUSE, CONT, NAME) markers,
// printed only with -v, are left out.
func writeTest(w io.Writer, name string, out []string) {
	indent := strings.Repeat("    ", strings.Count(name, "/"))
	var result string
	var rest []string
	for _, l := range out {
		t := strings.TrimLeft(l, " ")
		switch {
		case strings.HasPrefix(t, "=== "):
		case result == "" && strings.HasPrefix(t, "--- FAIL: "):
			result = t
		default:
			rest = append(rest, l)
		}
	}
	if result != "" {
		io.WriteString(w, indent+result)
	}
	for _, l := range rest {
		io.WriteString(w, indent+l)
	}
}

// logLine is a message of t.Log, t.Skip and the like: "    file.go:12: text".
var logLine = regexp.MustCompile(`^\s+([\w.+-]+\.go:\d+): (.*)$`)

// maxReason bounds a reason in the summary.
const maxReason = 400

// skipReason returns a skipped test's last message (its continuation lines
// joined to it), followed by where it was logged: "text (file.go:12)".
func skipReason(out []string) string {
	var lines []string
	for _, chunk := range out {
		for _, l := range strings.Split(strings.TrimRight(chunk, "\n"), "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "=== ") && !strings.HasPrefix(t, "--- ") {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) == 0 {
		return "(no reason given)"
	}
	start := 0
	for i := len(lines) - 1; i >= 0; i-- {
		if logLine.MatchString(lines[i]) {
			start = i
			break
		}
	}
	var where string
	parts := []string{strings.TrimSpace(lines[start])}
	if m := logLine.FindStringSubmatch(lines[start]); m != nil {
		where, parts[0] = m[1], strings.TrimSpace(m[2])
	}
	for _, l := range lines[start+1:] {
		parts = append(parts, strings.TrimSpace(l))
	}
	why := strings.Join(parts, " ")
	if len(why) > maxReason {
		why = why[:maxReason] + "..."
	}
	if where != "" {
		why += " (" + where + ")"
	}
	return why
}

// appendSkips appends skips to the file at path, one JSON line each.
func appendSkips(path string, skips []skip) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, s := range skips {
		if err := enc.Encode(s); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// readSkips reads the skips file; a missing file holds none.
func readSkips(path string) ([]skip, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var skips []skip
	for i, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var s skip
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
		skips = append(skips, s)
	}
	return skips, nil
}

// printSummary lists skips by run and returns how many no allow pattern
// matches; with ci it says that these fail the suite.
func printSummary(w io.Writer, skips []skip, allow allowList, ci bool) (bad int) {
	if len(skips) == 0 {
		fmt.Fprintln(w, "== no test skipped ==")
		return 0
	}
	fmt.Fprintf(w, "== skipped tests: %d (what this run did not check) ==\n", len(skips))
	var runs []string
	byRun := map[string][]skip{}
	for _, s := range skips {
		if _, ok := byRun[s.Run]; !ok {
			runs = append(runs, s.Run)
		}
		byRun[s.Run] = append(byRun[s.Run], s)
	}
	mark := "  [not a machine-dependent skip: fails the suite under CI=true]"
	if ci {
		mark = "  [NOT ALLOWED under CI=true]"
	}
	for _, run := range runs {
		if run != "" {
			fmt.Fprintf(w, "-- %s --\n", run)
		}
		for _, s := range byRun[run] {
			m := ""
			if allow.match(s.Reason) == "" {
				bad++
				m = mark
			}
			fmt.Fprintf(w, "SKIP %s %s: %s%s\n", s.Package, s.Test, s.Reason, m)
		}
	}
	if bad > 0 && ci {
		fmt.Fprintf(w, "FAIL: %d tests skipped under CI=true for a reason that the allow-list of scripts/test does not name (a missing tool, file or library?): install what they need; a skip that depends on the machine (a CPU feature) belongs in the allow-list\n", bad)
	}
	return bad
}
