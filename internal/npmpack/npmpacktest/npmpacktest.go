// Package npmpacktest puts a stand-in npm on PATH for the tests of the
// fetches that package npmpack does.
package npmpacktest

import (
	"archive/tar"
	"compress/gzip"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// FakeNPM puts an "npm" on PATH, for the rest of t, that answers `npm
// pack` by writing a tarball named tarName holding entries (a name in the
// tarball to its content), or, with fail, fails as a missing package does.
func FakeNPM(t testing.TB, tarName string, entries map[string][]byte, fail bool) {
	t.Helper()
	bin := t.TempDir()
	tgz := filepath.Join(t.TempDir(), tarName)
	f, err := os.Create(tgz)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		data := entries[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\n"
	if fail {
		script += "echo 'npm error 404 Not Found' >&2\nexit 1\n"
	} else {
		script += "[ \"$1\" = pack ] || exit 2\ncp '" + tgz + "' . && echo " + tarName + "\n"
	}
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}
