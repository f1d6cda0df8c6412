package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/xmr-project/xmr/blas"
)

func init() {
	register(&command{
		name:     "version",
		summary:  "print the version, the Go runtime and which GEMM implementation is in use",
		usage:    "",
		examples: "  xmr version\n  XMR_BLAS=go xmr version   # force the pure-Go GEMM",
		run: func(ctx context.Context, args []string) error {
			v := "devel"
			if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				v = bi.Main.Version
			}
			fmt.Fprintf(stdout, "xmr %s (%s, %s/%s, %d CPUs)\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
			fmt.Fprintf(stdout, "gemm: %s\n", blas.Describe())
			return nil
		},
	})
}
