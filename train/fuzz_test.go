package train

import (
	"math"
	"testing"

	"github.com/xmr-project/xmr/configs"
)

// FuzzParseConfig feeds arbitrary YAML to the config parser: it must fail
// cleanly or give a config that validates, whose model builds its
// parameter count and memory estimate without overflow or panic, and that
// survives its own Marshal.
func FuzzParseConfig(f *testing.F) {
	for _, name := range []string{"teran-mrsw-small", "tern-align-small", "teran-mrsw-bigru-small"} {
		b, _ := configs.Lookup(name)
		f.Add(b)
	}
	for _, s := range []string{"", "model:\n  embed-size: 2000000000\n", "model:\n  layers: 100000\n", "training:\n  scheduler: cosinex\n",
		"model:\n  dropout: 1.5\n", "dataset:\n  max-caption-tokens: 0\n", "training:\n  lr: .nan\n", "model: {name: tern}\ntraining: {loss-type: matching}\n",
		"text-model:\n  name: transformer\n  heads: 3\n", "&a [*a]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted a config that Validate refuses: %v", err)
		}
		for _, regions := range []int{0, 1, 36, 1 << 20} {
			est := EstimateMemory(c, regions)
			if tot := est.Total(); math.IsNaN(tot) || tot <= 0 || math.IsInf(tot, 0) {
				t.Fatalf("estimate %v for %d regions", est, regions)
			}
			_ = est.String()
		}
		again, err := ParseConfig([]byte(c.Marshal()))
		if err != nil || again.Marshal() != c.Marshal() {
			t.Fatalf("Marshal does not round-trip: %v\n%s", err, c.Marshal())
		}
	})
}
