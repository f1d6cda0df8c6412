package train

import (
	"context"
	"os"
	"strconv"
	"testing"
)

func TestExperiment(t *testing.T) {
	if os.Getenv("XMR_EXP") == "" {
		t.Skip("experiment: set XMR_EXP=1")
	}
	dir := testWorld(t)
	cfg := tinyConfig(t, os.Getenv("CFG"))
	cfg.Training.MaxViolation = os.Getenv("MV") == "1"
	if lr, err := strconv.ParseFloat(os.Getenv("LR"), 64); err == nil {
		cfg.Training.LR = lr
	}
	cfg.Training.ValStep = 50
	out := t.TempDir()
	if _, err := Run(context.Background(), Options{Config: cfg, Data: dir, Out: out, MaxIters: 300, ValImages: 200}); err != nil {
		t.Fatal(err)
	}
}
