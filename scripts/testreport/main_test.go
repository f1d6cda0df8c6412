package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testdata/events.json is what `go test -count=1 -json ./...` (Go 1.26)
// wrote for three packages: a passes, with a test that skips (a message
// of two lines after a log line) and a skipped subtest; b fails in a
// subtest, and prints from a passing test; c has no tests.
func TestFilter(t *testing.T) {
	in, err := os.Open(filepath.Join("testdata", "events.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out bytes.Buffer
	skips, err := filter(in, &out, "the run")
	if err != nil {
		t.Fatal(err)
	}
	// What go test prints without -json, less the passing test's print.
	want := "--- FAIL: TestBad (0.00s)\n" +
		"    --- FAIL: TestBad/sub (0.00s)\n" +
		"        b_test.go:10: wrong: 2\n" +
		"FAIL\n" +
		"FAIL\texample.com/s/b\t0.031s\n" +
		"?   \texample.com/s/c\t[no test files]\n" +
		"ok  \texample.com/s/a\t0.035s\n" +
		"FAIL\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	wantSkips := []skip{
		{Run: "the run", Package: "example.com/s/a", Test: "TestSkip", Reason: "no tool here: second line (a_test.go:8)"},
		{Run: "the run", Package: "example.com/s/a", Test: "TestSub/one", Reason: "this CPU cannot run the avx512 kernel (a_test.go:11)"},
	}
	if len(skips) != len(wantSkips) {
		t.Fatalf("skips %+v, want %+v", skips, wantSkips)
	}
	for i := range skips {
		if skips[i] != wantSkips[i] {
			t.Errorf("skip %d: %+v, want %+v", i, skips[i], wantSkips[i])
		}
	}
}

func TestFilterNotJSON(t *testing.T) {
	var out bytes.Buffer
	in := "go: downloading example.com/x v1.0.0\n" +
		`{"Action":"build-output","ImportPath":"example.com/s/d [example.com/s/d.test]","Output":"d/d_test.go:3:1: syntax error\n"}` + "\n" +
		`{"Action":"build-fail","ImportPath":"example.com/s/d [example.com/s/d.test]"}` + "\n" +
		`{"Action":"start","Package":"example.com/s/d"}` + "\n" +
		`{"Action":"output","Package":"example.com/s/d","Output":"FAIL\texample.com/s/d [build failed]\n"}` + "\n" +
		`{"Action":"fail","Package":"example.com/s/d","FailedBuild":"example.com/s/d [example.com/s/d.test]"}` + "\n" +
		`{"Action":"run","Package":"example.com/s/e","Test":"TestHang"}` + "\n" +
		`{"Action":"output","Package":"example.com/s/e","Test":"TestHang","Output":"panic: test timed out after 1s\n"}` + "\n"
	skips, err := filter(strings.NewReader(in), &out, "")
	if err != nil || len(skips) != 0 {
		t.Fatalf("filter: %v, %v", skips, err)
	}
	want := "go: downloading example.com/x v1.0.0\n" +
		"d/d_test.go:3:1: syntax error\n" +
		"FAIL\texample.com/s/d [build failed]\n" +
		"panic: test timed out after 1s\n" + // a package cut short: its unfinished test's output
		"FAIL\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestSkipReason(t *testing.T) {
	for _, tc := range []struct {
		out  []string
		want string
	}{
		{[]string{"=== RUN   TestX\n", "    x_test.go:12: no npm: exec: \"npm\": not found\n", "--- SKIP: TestX (0.00s)\n"}, `no npm: exec: "npm": not found (x_test.go:12)`},
		{[]string{"=== RUN   TestX\n", "--- SKIP: TestX (0.00s)\n"}, "(no reason given)"},
		{[]string{"=== RUN   TestX/sub\n", "    x_test.go:3: one\n", "    x_test.go:4: two\n", "        three\n", "    --- SKIP: TestX/sub (0.00s)\n"}, "two three (x_test.go:4)"},
		{[]string{"something printed\n", "--- SKIP: TestX (0.00s)\n"}, "something printed"},
	} {
		if got := skipReason(tc.out); got != tc.want {
			t.Errorf("skipReason(%q) = %q, want %q", tc.out, got, tc.want)
		}
	}
	long := skipReason([]string{"    x_test.go:1: " + strings.Repeat("x", 2*maxReason) + "\n"})
	if len(long) > maxReason+40 || !strings.HasSuffix(long, "... (x_test.go:1)") {
		t.Errorf("a long reason: %d bytes, %q", len(long), long[len(long)-30:])
	}
}

// TestSummary records skips in two runs and lists them by run: under
// -ci, a skip whose reason no -allow pattern matches fails.
func TestSummary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "skips.jsonl")
	if err := appendSkips(path, []skip{{Run: "OpenBLAS", Package: "p", Test: "TestA", Reason: "this CPU cannot run the avx512 kernel (a_test.go:1)"}}); err != nil {
		t.Fatal(err)
	}
	if err := appendSkips(path, []skip{
		{Run: "pure Go", Package: "p", Test: "TestB", Reason: "needs OpenBLAS; in use: go (OpenBLAS not used: XMR_BLAS=go selects the pure-Go GEMM) (b_test.go:2)"},
		{Run: "pure Go", Package: "q", Test: "TestC", Reason: "no python3 (c_test.go:3)"},
	}); err != nil {
		t.Fatal(err)
	}
	skips, err := readSkips(path)
	if err != nil || len(skips) != 3 {
		t.Fatalf("readSkips: %v, %v", skips, err)
	}
	var out bytes.Buffer
	allow := allowList{regexp.MustCompile(`this CPU`), regexp.MustCompile(`XMR_BLAS=[a-z]+ selects the pure-Go GEMM`)}
	if bad := printSummary(&out, skips, allow, true); bad != 1 {
		t.Errorf("%d skips not allowed, want 1 (TestC)", bad)
	}
	for _, want := range []string{
		"== skipped tests: 3",
		"-- OpenBLAS --\nSKIP p TestA: this CPU cannot run the avx512 kernel (a_test.go:1)\n",
		"-- pure Go --\nSKIP p TestB: needs OpenBLAS; in use: go (OpenBLAS not used: XMR_BLAS=go selects the pure-Go GEMM) (b_test.go:2)\nSKIP q TestC: no python3 (c_test.go:3)  [NOT ALLOWED under CI=true]\n",
		"FAIL: 1 tests skipped under CI=true",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if bad := printSummary(&out, skips, nil, false); bad != 3 || strings.Contains(out.String(), "FAIL") || !strings.Contains(out.String(), "fails the suite under CI=true") {
		t.Errorf("without -ci: %d not allowed, summary:\n%s", bad, out.String())
	}
	if none, err := readSkips(filepath.Join(t.TempDir(), "none")); err != nil || none != nil {
		t.Errorf("no skips file: %v, %v", none, err)
	}
	out.Reset()
	printSummary(&out, nil, nil, true)
	if out.String() != "== no test skipped ==\n" {
		t.Errorf("no skips: %q", out.String())
	}
}
