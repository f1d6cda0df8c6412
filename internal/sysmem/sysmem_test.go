package sysmem

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadFrom(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	meminfo := write("meminfo", "MemTotal:       24000000 kB\nMemFree:  1000 kB\nMemAvailable:   20000000 kB\n")
	none := filepath.Join(dir, "none")
	limit := write("memory.max", "4294967296\n")
	current := write("memory.current", "1073741824\n")
	noLimit := write("memory.max.none", "max\n")
	for _, c := range []struct {
		name                     string
		meminfo, max, current    string
		ok                       bool
		wantAvailable, wantTotal float64
	}{
		{"meminfo only", meminfo, none, none, true, 20000000 * 1024, 24000000 * 1024},
		{"a cgroup limit", meminfo, limit, current, true, 3 << 30, 4 << 30},
		{"no cgroup limit (max)", meminfo, noLimit, current, true, 20000000 * 1024, 24000000 * 1024},
		{"no meminfo", none, limit, current, false, 0, 0},
		{"meminfo without MemAvailable", write("meminfo.old", "MemTotal: 1000 kB\n"), none, none, false, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, ok := ReadFrom(c.meminfo, c.max, c.current)
			if ok != c.ok || m.Available != c.wantAvailable || m.Total != c.wantTotal {
				t.Errorf("ReadFrom = %+v, %v; want %v available, %v in all, %v", m, ok, c.wantAvailable, c.wantTotal, c.ok)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		b    float64
		want string
	}{{512 << 20, "512 MiB"}, {1.5 * (1 << 30), "1.5 GiB"}, {3 << 40, "3 TiB"}} {
		if got := Format(c.b); got != c.want {
			t.Errorf("Format(%v) = %q, want %q", c.b, got, c.want)
		}
	}
}
