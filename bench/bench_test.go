package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestWithPeer(t *testing.T) {
	cases := []struct {
		value, peer float64
		higher      bool
		want        float64
	}{
		{200, 100, true, 2},   // a rate twice the peer's
		{0.5, 1, false, 2},    // a time half the peer's
		{3, 0, true, 0},       // no peer value: no ratio
		{100, 200, true, 0.5}, // slower
	}
	for _, c := range cases {
		r := Result{Name: "x", Metric: "m", Value: c.value, Unit: "u"}.WithPeer("p", c.peer, c.higher)
		if r.Ratio != c.want || r.Peer != "p" || r.PeerValue != c.peer {
			t.Errorf("%+v: got ratio %v, want %v", c, r.Ratio, c.want)
		}
	}
}

func TestWriteJSONFields(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, Result{Name: "gemm", Metric: "GFLOP/s", Value: 190, Unit: "GFLOP/s"}.WithPeer("raw", 200, true)); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "metric", "value", "unit", "peer", "peer_value", "ratio"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON %s lacks %q", b.String(), k)
		}
	}
	if !strings.HasSuffix(b.String(), "}\n") || strings.Count(b.String(), "\n") != 1 {
		t.Errorf("not one JSON object per line: %q", b.String())
	}
	b.Reset()
	WriteJSON(&b, Result{Name: "n", Metric: "m", Value: 1, Unit: "u"})
	if strings.Contains(b.String(), "peer") || strings.Contains(b.String(), "ratio") {
		t.Errorf("a result without a peer prints peer fields: %s", b.String())
	}
}

func TestMedian(t *testing.T) {
	cases := []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, c := range cases {
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}
