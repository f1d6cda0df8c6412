//go:build js || wasip1

package infile

// openFlags is 0 where syscall has neither O_NONBLOCK nor O_NOCTTY (nor
// FIFOs to wait on).
const openFlags = 0
