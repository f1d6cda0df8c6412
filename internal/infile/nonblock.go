//go:build !(js || wasip1)

package infile

import "syscall"

// openFlags make open(2) of a FIFO without a writer return at once, and
// keep a terminal from becoming the controlling one.
const openFlags = syscall.O_NONBLOCK | syscall.O_NOCTTY
