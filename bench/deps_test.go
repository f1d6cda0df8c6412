package bench

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoLibraryImportsBench checks the direction of the imports: the
// benchmarks (bench/...) and the command import the libraries, no library
// imports anything under bench/.
func TestNoLibraryImportsBench(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: go list loads every package")
	}
	goTool, err := exec.LookPath("go") // go test puts its own first on $PATH
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	const module = "github.com/xmr-project/xmr"
	out, err := exec.Command(goTool, "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	isBench := func(p string) bool { return p == module+"/bench" || strings.HasPrefix(p, module+"/bench/") }
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, deps := f[0], f[1:]
		if isBench(pkg) || pkg == module+"/cmd/xmr" {
			continue
		}
		checked++
		for _, d := range deps {
			if isBench(d) {
				t.Errorf("%s depends on %s: libraries must not import the benchmarks", pkg, d)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d packages:\n%s", checked, out)
	}
}
