package main

import "testing"

// TestInvokedAs checks that suggested commands name the binary as the user
// ran it, and fall back to xmr for binaries of go run and go test.
func TestInvokedAs(t *testing.T) {
	cases := []struct{ arg0, want string }{
		{"bin/xmr", "bin/xmr"},
		{"./bin/xmr", "./bin/xmr"},
		{"xmr", "xmr"},
		{"/usr/local/bin/xmr", "/usr/local/bin/xmr"},
		{"/tmp/go-build123/b001/exe/xmr", "xmr"},
		{"/tmp/TestX/xmr.test", "xmr"},
		{"", "xmr"},
	}
	for _, c := range cases {
		if got := invokedAs(c.arg0); got != c.want {
			t.Errorf("invokedAs(%q) = %q, want %q", c.arg0, got, c.want)
		}
	}
}
