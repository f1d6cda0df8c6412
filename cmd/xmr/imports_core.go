package main

// Packages linked for their side effects: they register benchmarks with
// package bench from init functions.
import (
	_ "github.com/xmr-project/xmr/blas"
	_ "github.com/xmr-project/xmr/blas/gemmbench"
)
