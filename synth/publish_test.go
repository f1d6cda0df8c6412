package synth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/data"
)

// TestHalfReplacedWorldRefused replaces a world of seed 1 by one of seed 2
// and stops the replacement after the first renames, as a kill -9 during
// `xmr synth --overwrite` does: the directory then mixes the two worlds,
// and world.json is gone. Readers must refuse it (data.LoadPrecomp, which
// xmr eval and train use, accepted it), and the next complete run must
// make it whole again.
func TestHalfReplacedWorldRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{N: 60, Seed: 1, Dim: 8, Regions: 6, NoImages: true, Dev: 10, Test: 10}
	if _, err := Generate(context.Background(), dir, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, data.IncompleteMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a complete world holds %s (stat: %v)", data.IncompleteMarker, err)
	}
	killed := errors.New("killed")
	renames := 0
	testHookRename = func(string) error {
		if renames++; renames > 3 {
			return killed
		}
		return nil
	}
	cfg.Seed = 2
	_, err := Generate(context.Background(), dir, cfg)
	testHookRename = nil
	if !errors.Is(err, killed) {
		t.Fatalf("the replacement: err = %v, want the simulated kill", err)
	}
	if _, err := LoadManifest(dir); err == nil || !strings.Contains(err.Error(), "half replaced") {
		t.Errorf("LoadManifest of a half-replaced world: err = %v", err)
	}
	for _, split := range []string{"test", "testall", "dev", "train"} {
		s, err := data.LoadPrecomp(context.Background(), dir, split, nil)
		if err == nil {
			s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "half replaced") || !strings.Contains(err.Error(), data.IncompleteMarker) {
			t.Errorf("LoadPrecomp %s of a half-replaced world: err = %v", split, err)
		}
	}
	// The next run completes the world and removes the marker.
	if _, err := Generate(context.Background(), dir, cfg); err != nil {
		t.Fatal(err)
	}
	m, err := LoadManifest(dir)
	if err != nil || m.Seed != 2 {
		t.Fatalf("after a complete run: manifest %+v, err %v", m, err)
	}
	s, err := data.LoadPrecomp(context.Background(), dir, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestGroundingInRange checks that the ground truth of a generated world
// passes data.CheckGrounding, which eval and train now apply.
func TestGroundingInRange(t *testing.T) {
	dir := t.TempDir()
	if _, err := Generate(context.Background(), dir, Config{N: 60, Seed: 3, Dim: 8, Regions: 6, NoImages: true, Dev: 10, Test: 10}); err != nil {
		t.Fatal(err)
	}
	for _, split := range []string{"dev", "test", "testall", "train"} {
		gs, err := data.LoadGrounding(dir, split)
		if err != nil || len(gs) == 0 {
			t.Fatalf("%s: %d records, %v", split, len(gs), err)
		}
		s, err := data.LoadPrecomp(context.Background(), dir, split, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := data.CheckGrounding(gs, s); err != nil {
			t.Errorf("%s: %v", split, err)
		}
		s.Close()
	}
}
