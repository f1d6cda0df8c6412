package train

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMetricsNotFinite: a validation record with non-finite numbers (the
// image cosine of a single validation image is NaN) is written to
// metrics.json as null, with the value and why under "not_finite", never
// as a NaN token nor as an encoding failure; reading it back gives the
// values again. The run state, which holds the history, encodes too.
func TestMetricsNotFinite(t *testing.T) {
	dir := t.TempDir()
	single := meanCosine([]float32{1, 0}, 2) // one image
	if !math.IsNaN(single) {
		t.Fatalf("meanCosine of one vector = %v, want NaN (the case this test is about)", single)
	}
	hist := []Record{
		{Iter: 1, Loss: 2, RSum: 100, ImgCos: 0.5, TxtCos: 0.25, NDCG: map[string]float64{"rouge-l/i2t": 0.5}},
		{Iter: 2, Loss: math.Inf(1), RSum: 90, ImgCos: single, TxtCos: 0.3, NDCG: map[string]float64{"rouge-l/i2t": math.NaN(), "rouge-l/t2i": 0.4}},
	}
	if err := writeMetrics(dir, hist); err != nil {
		t.Fatalf("writeMetrics: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "metrics.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) || bytes.Contains(b, []byte("NaN,")) || bytes.Contains(b, []byte(": NaN")) || bytes.Contains(b, []byte("Infinity")) {
		t.Fatalf("metrics.json is not valid JSON without NaN tokens:\n%s", b)
	}
	var raw []map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if v, ok := raw[1]["img_cos"]; !ok || v != nil {
		t.Errorf("img_cos = %v (present %v), want null", v, ok)
	}
	nf, _ := raw[1]["not_finite"].(map[string]any)
	for key, want := range map[string]string{"img_cos": "NaN: the mean cosine between different validation images is undefined for fewer than two images", "loss": "+Inf", "ndcg/rouge-l/i2t": "NaN"} {
		if got, _ := nf[key].(string); !strings.HasPrefix(got, want) {
			t.Errorf("not_finite[%q] = %q, want it to start with %q", key, got, want)
		}
	}
	if _, ok := raw[0]["not_finite"]; ok {
		t.Errorf("a finite record has not_finite: %v", raw[0])
	}
	// Read back.
	var back []Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	r := back[1]
	if !math.IsNaN(r.ImgCos) || !math.IsInf(r.Loss, 1) || !math.IsNaN(r.NDCG["rouge-l/i2t"]) || r.NDCG["rouge-l/t2i"] != 0.4 || r.TxtCos != 0.3 || r.RSum != 90 {
		t.Errorf("read back %+v", r)
	}
	if back[0].ImgCos != 0.5 || back[0].NDCG["rouge-l/i2t"] != 0.5 {
		t.Errorf("read back %+v", back[0])
	}
	// The state saved in checkpoints holds the history.
	if _, err := json.Marshal(state{History: hist}); err != nil {
		t.Errorf("state with the history: %v", err)
	}
}
