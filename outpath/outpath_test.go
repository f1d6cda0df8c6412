package outpath

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	mk := func(rel string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(rel), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ckpt := mk("ckpt.safetensors")
	best := mk("run/best-rsum.safetensors")
	caps := mk("world/test_caps.txt")
	cfg := mk("run/config.yaml")
	tsv := mk("tsv/a.tsv.0")
	mk("tsv/a.tsv.1")
	run, world := filepath.Join(dir, "run"), filepath.Join(dir, "world")
	link := filepath.Join(dir, "link.safetensors")
	if err := os.Symlink(ckpt, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.safetensors")
	if err := os.Link(ckpt, hard); err != nil {
		t.Fatal(err)
	}
	worldLink := filepath.Join(dir, "worldlink")
	if err := os.Symlink(world, worldLink); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	trainWrites := []string{"last.safetensors", "best-*.safetensors", "config.yaml"}

	cases := []struct {
		name       string
		in         []Input
		out        []Output
		flag, with string // the refused output's flag and the flag it collides with; "" = accepted
		msg        string
	}{
		{"distinct", []Input{{"--checkpoint", ckpt}, {"--data", world}}, []Output{{Flag: "--out", Path: filepath.Join(dir, "m.json")}}, "", "", ""},
		{"same path", []Input{{"--checkpoint", ckpt}}, []Output{{Flag: "--save-sims", Path: ckpt}}, "--save-sims", "--checkpoint", "is the file that --checkpoint"},
		{"same path, unclean", []Input{{"--checkpoint", ckpt}}, []Output{{Flag: "--out", Path: filepath.Join(dir, "run", "..", "ckpt.safetensors")}}, "--out", "--checkpoint", ""},
		{"through a symbolic link", []Input{{"--checkpoint", link}}, []Output{{Flag: "--out", Path: ckpt}}, "--out", "--checkpoint", ""},
		{"a hard link", []Input{{"--checkpoint", hard}}, []Output{{Flag: "--out", Path: ckpt}}, "--out", "--checkpoint", ""},
		{"missing input, same name", []Input{{"--sims", filepath.Join(dir, "none.npy")}}, []Output{{Flag: "--out", Path: filepath.Join(dir, "none.npy")}}, "--out", "--sims", ""},
		{"inside a run directory", []Input{{"--checkpoint", run}}, []Output{{Flag: "--save-sims", Path: best}}, "--save-sims", "--checkpoint", "is inside --checkpoint"},
		{"new file inside a data directory", []Input{{"--data", world}}, []Output{{Flag: "--out", Path: filepath.Join(world, "new.json")}}, "--out", "--data", ""},
		{"inside, through a linked directory", []Input{{"--data", worldLink}}, []Output{{Flag: "--out", Path: caps}}, "--out", "--data", ""},
		{"the directory itself", []Input{{"--data", world}}, []Output{{Flag: "--out", Path: world, Kind: Dir}}, "--out", "--data", "is the directory"},
		{"glob match", []Input{{"--data", filepath.Join(dir, "tsv", "*.tsv.*")}}, []Output{{Flag: "--out", Path: tsv}}, "--out", "--data", ""},
		{"dir writes over an input", []Input{{"--config", cfg}}, []Output{{Flag: "--out", Path: run, Kind: Dir, Writes: trainWrites}}, "--out", "--config", "would write over --config"},
		{"dir writes over a checkpoint by pattern", []Input{{"--checkpoint", best}}, []Output{{Flag: "--out", Path: run, Kind: Dir, Writes: trainWrites}}, "--out", "--checkpoint", ""},
		{"dir leaves other files", []Input{{"--config", cfg}}, []Output{{Flag: "--out", Path: run, Kind: Dir, Writes: []string{"last.safetensors"}}}, "", "", ""},
		{"dir owned whole", []Input{{"--config", cfg}}, []Output{{Flag: "--out", Path: run, Kind: Dir}}, "--out", "--config", ""},
		{"dir inside an input directory", []Input{{"--data", world}}, []Output{{Flag: "--out", Path: filepath.Join(world, "runs", "a"), Kind: Dir}}, "--out", "--data", ""},
		{"file beside an output", []Input{{"--captions", caps}}, []Output{{Flag: "--out", Path: filepath.Join(dir, "r.bin"), Writes: []string{caps}}}, "--out", "--captions", "would write"},
		{"file written beside, distinct", []Input{{"--captions", caps}}, []Output{{Flag: "--out", Path: filepath.Join(dir, "r.bin"), Writes: []string{filepath.Join(dir, "r.bin.partial")}}}, "", "", ""},
		{"two outputs", nil, []Output{{Flag: "--out", Path: filepath.Join(dir, "x")}, {Flag: "--save-sims", Path: filepath.Join(dir, "x")}}, "--save-sims", "--out", "name the same file"},
		{"file output among a dir output's files", nil, []Output{{Flag: "--out", Path: run, Kind: Dir, Writes: trainWrites}, {Flag: "--cpuprofile", Path: filepath.Join(run, "last.safetensors")}}, "--cpuprofile", "--out", ""},
		{"file output beside a dir output's files", nil, []Output{{Flag: "--out", Path: run, Kind: Dir, Writes: trainWrites}, {Flag: "--cpuprofile", Path: filepath.Join(run, "cpu.prof")}}, "", "", ""},
		{"a FIFO for a file", nil, []Output{{Flag: "--out", Path: fifo}}, "--out", "", "is a FIFO, not a regular file"},
		{"a FIFO for a stream", nil, []Output{{Flag: "--out", Path: fifo, Kind: Stream}}, "", "", ""},
		{"a FIFO for a directory", nil, []Output{{Flag: "--out", Path: fifo, Kind: Dir}}, "--out", "", "is a FIFO, not a directory"},
		{"a directory for a file", nil, []Output{{Flag: "--out", Path: run, Kind: Stream}}, "--out", "", "is a directory, not a regular file"},
		{"a file for a directory", nil, []Output{{Flag: "--out", Path: ckpt, Kind: Dir}}, "--out", "", "is a regular file, not a directory"},
		{"a FIFO beside", nil, []Output{{Flag: "--out", Path: filepath.Join(dir, "r.bin"), Writes: []string{fifo}}}, "--out", "", "is a FIFO"},
		{"not given", []Input{{"--data", ""}}, []Output{{Flag: "--out", Path: ""}}, "", "", ""},
		{"a FIFO as an input", []Input{{"--captions", fifo}}, []Output{{Flag: "--out", Path: filepath.Join(dir, "m.json")}}, "--captions", "", "is a FIFO, not a file or directory to read"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.in, c.out)
			if c.flag == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Check = %v, want an *Error", err)
			}
			if e.Flag != c.flag || e.Other != c.with || !strings.Contains(err.Error(), c.flag) || !strings.Contains(err.Error(), c.with) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Check = %q (flag %s, other %q), want %s against %q saying %q", err, e.Flag, e.Other, c.flag, c.with, c.msg)
			}
		})
	}
	// Check writes nothing.
	if _, err := os.Stat(filepath.Join(dir, "m.json")); !os.IsNotExist(err) {
		t.Errorf("Check created an output: %v", err)
	}
}

// TestDeviceNode: a device node is refused as any output, stream or not.
func TestDeviceNode(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "full")
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|7); err != nil {
		t.Skipf("cannot make a device node here (needs root, or CAP_MKNOD): %v", err)
	}
	for _, k := range []Kind{File, Stream, Dir} {
		err := Check(nil, []Output{{Flag: "--out", Path: dev, Kind: k}})
		if err == nil || !strings.Contains(err.Error(), "--out "+dev+" is a character device") {
			t.Errorf("kind %d: %v, want a refusal of the character device", k, err)
		}
	}
}
