package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/eval"
)

// TestEvalCompatOfficial: xmr eval --compat official evaluates a TERAN
// with the official evaluation's scores (other than xmr's own on the
// synthetic world's images of 6 regions), and refuses what it cannot
// score so before any encoding.
func TestEvalCompatOfficial(t *testing.T) {
	world, ckpt := evalWorld(t)
	dir := t.TempDir()
	sims := map[string]*eval.Matrix{}
	for _, compat := range []string{"none", "official"} {
		path := filepath.Join(dir, compat+".npy")
		stdout, stderr, code := run(t, "eval", "--checkpoint", ckpt, "--data", world, "--no-ndcg", "--compat", compat, "--save-sims", path)
		if code != 0 || !strings.Contains(stdout, "rsum") {
			t.Fatalf("--compat %s: exit %d, stdout %q, stderr %s", compat, code, stdout, stderr)
		}
		m, err := eval.ReadNPY(path)
		if err != nil {
			t.Fatal(err)
		}
		sims[compat] = m
	}
	differ := 0
	for k, v := range sims["official"].Data {
		if v != sims["none"].Data[k] {
			differ++
		}
	}
	if differ == 0 {
		t.Error("--compat official gave xmr's own scores")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pooling", "global"}, "not to global scoring"},
		{[]string{"--compat", "teran"}, `unknown compatibility "teran"`},
	} {
		args := append([]string{"eval", "--checkpoint", ckpt, "--data", world, "--no-ndcg", "--compat", "official"}, c.args...)
		_, stderr, code := run(t, args...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "encode images") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error %q before any encoding", c.args, code, stderr, c.want)
		}
	}
}

// TestCompatRefusedWhereItCannotApply: --compat goes with --checkpoint in
// xmr eval, and xmr index and xmr search refuse it, saying where the
// official scores are.
func TestCompatRefusedWhereItCannotApply(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "--sims", filepath.Join(dir, "s.npy"), "--compat", "official"}, "--compat and --space go with --checkpoint"},
		{[]string{"search", "--index", dir, "--text", "a red circle", "--compat", "official"}, "xmr search does not score as the official TERAN evaluation"},
		{[]string{"index", "--checkpoint", filepath.Join(dir, "c.safetensors"), "--data", dir, "--out", filepath.Join(dir, "ix"), "--compat", "official"}, "xmr index does not score as the official TERAN evaluation"},
		{[]string{"search", "--index", dir, "--text", "a red circle", "--compat", "other"}, `unknown compatibility "other"`},
	} {
		_, stderr, code := run(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want a usage error with %q", c.args, code, stderr, c.want)
		}
		if c.args[0] != "eval" && !strings.Contains(stderr, "xmr eval --checkpoint CKPT --compat official") && !strings.Contains(c.want, "unknown") {
			t.Errorf("%v: stderr %q does not say where the official scores are", c.args, stderr)
		}
	}
}
