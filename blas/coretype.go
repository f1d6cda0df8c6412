package blas

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/cpu"
)

// OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels at load time
// from the CPU's family and model numbers. A CPU newer than the library
// (OpenBLAS 0.3.21 does not know Intel's family 6 model 207, a Xeon with
// AVX-512) gets the generic "Prescott" kernels, SSE3 only: 3 to 7 times
// slower products than the CPU can run (measured on that Xeon: a 16384 x 80
// x 128 product at 28 GFLOP/s with Prescott's kernels, 83 with SkylakeX's).
// OpenBLAS lets the environment variable OPENBLAS_CORETYPE choose instead;
// when the user has not set it and the library fell back to kernels older
// than the CPU's vector unit, xmr re-initialises the library with the
// kernels the CPU can run, chosen from the features the CPU reports.

// preAVX2Cores are OpenBLAS core names whose kernels use no AVX2 or FMA.
var preAVX2Cores = map[string]bool{
	"prescott": true, "core2": true, "penryn": true, "dunnington": true, "nehalem": true,
	"atom": true, "katmai": true, "coppermine": true, "northwood": true, "banias": true,
	"athlon": true, "opteron": true, "opteron(sse3)": true, "barcelona": true, "bobcat": true,
	"sandybridge": true, "unknown": true,
}

// coreFor returns the OpenBLAS core type whose kernels fit a CPU with these
// features, or "" when none beyond the generic ones does.
func coreFor(avx512, avx2fma bool) string {
	switch {
	case avx512:
		return "SkylakeX"
	case avx2fma:
		return "Haswell"
	}
	return ""
}

// cpuCore is coreFor of the CPU this process runs on.
func cpuCore() string {
	if runtime.GOARCH != "amd64" {
		return ""
	}
	x := cpu.X86
	avx512 := x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512DQ && x.HasAVX512CD
	return coreFor(avx512, x.HasAVX2 && x.HasFMA)
}

// needsCore says which core type to load instead of the one the library
// chose (loaded), or "" to keep it: only when the user left the choice to
// the library (userSet false), the library chose kernels without AVX2, and
// the CPU can run better ones.
func needsCore(loaded string, userSet bool, want string) string {
	if userSet || want == "" || !preAVX2Cores[lower(loaded)] {
		return ""
	}
	return want
}

// fixCore re-initialises a loaded OpenBLAS with the kernels of the CPU at
// hand when the library fell back to generic ones. It records in ob.Core
// the kernels in use and in ob.CoreNote why they were chosen.
func (ob *OpenBLAS) fixCore(h uintptr) {
	ob.Core = ob.coreName()
	env, userSet := os.LookupEnv("OPENBLAS_CORETYPE")
	if userSet && chosen.note != "" && env == chosen.core {
		ob.CoreNote = chosen.note // set by an earlier load in this process
		return
	}
	if userSet {
		ob.CoreNote = "OPENBLAS_CORETYPE set by the user"
	}
	want := needsCore(ob.Core, userSet, cpuCore())
	if want == "" {
		return
	}
	err := ob.reinit(h, want)
	if err != nil {
		ob.CoreNote = fmt.Sprintf("OpenBLAS chose %s kernels for a CPU that can run %s's; switching failed: %v", ob.Core, want, err)
		return
	}
	got := ob.coreName()
	if !strings.EqualFold(got, want) {
		ob.CoreNote = fmt.Sprintf("OpenBLAS chose %s kernels for a CPU that can run %s's; asked for %s, it loaded %s", ob.Core, want, want, got)
		ob.Core = got
		return
	}
	ob.CoreNote = fmt.Sprintf("chosen by xmr: this OpenBLAS did not recognise the CPU and fell back to %s kernels", ob.Core)
	ob.Core = got
	chosen.core, chosen.note = want, ob.CoreNote
	// Child processes (the Python peers of the benchmarks, which load the
	// same library) then get the same kernels.
	os.Setenv("OPENBLAS_CORETYPE", want)
}

// chosen records the kernels fixCore chose in this process, so that a
// second load does not take its own setting for the user's.
var chosen struct{ core, note string }

// coreName is openblas_get_corename(), or "" when the library lacks it.
func (ob *OpenBLAS) coreName() string {
	if ob.corename == nil {
		return ""
	}
	return ob.corename()
}

// reinit sets OPENBLAS_CORETYPE in the C environment and runs the
// library's dynamic-architecture initialisation again.
func (ob *OpenBLAS) reinit(h uintptr, core string) error {
	quitSym, err := purego.Dlsym(h, "gotoblas_dynamic_quit")
	if err != nil {
		return err
	}
	initSym, err := purego.Dlsym(h, "gotoblas_dynamic_init")
	if err != nil {
		return err
	}
	libc, err := purego.Dlopen(libcName(), purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return err
	}
	setenvSym, err := purego.Dlsym(libc, "setenv")
	if err != nil {
		return err
	}
	var quit, initialise func()
	var setenv func(name, value string, overwrite int32) int32
	purego.RegisterFunc(&quit, quitSym)
	purego.RegisterFunc(&initialise, initSym)
	purego.RegisterFunc(&setenv, setenvSym)
	if setenv("OPENBLAS_CORETYPE", core, 1) != 0 {
		return fmt.Errorf("setenv OPENBLAS_CORETYPE failed")
	}
	quit()
	initialise()
	return nil
}

func libcName() string {
	if runtime.GOOS == "darwin" {
		return "/usr/lib/libSystem.B.dylib"
	}
	return "libc.so.6"
}

func lower(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
