package synth

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sbinet/npyio"
	"github.com/xmr-project/xmr/lockfile"
	"github.com/xmr-project/xmr/npy"
)

func TestAllocate(t *testing.T) {
	tests := []struct {
		n, dev, test            int
		train, dv, tst, testall int
		wantErr                 bool
	}{
		{n: 100, train: 60, dv: 20, tst: 20, testall: 20},
		{n: 2000, train: 1200, dv: 400, tst: 400, testall: 400},
		{n: 12000, train: 7200, dv: 2400, tst: 1000, testall: 2400},
		{n: 123287, train: 113287, dv: 5000, tst: 1000, testall: 5000},
		{n: 1000000, train: 990000, dv: 5000, tst: 1000, testall: 5000},
		{n: 3, train: 1, dv: 1, tst: 1, testall: 1},
		{n: 10000, dev: 100, test: 5000, train: 4900, dv: 100, tst: 1000, testall: 5000},
		{n: 100, dev: 50, test: 50, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.n, "/", tc.dev, "/", tc.test), func(t *testing.T) {
			sp, err := Allocate(tc.n, tc.dev, tc.test)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("no error for %+v", sp)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Split{}
			for _, s := range sp {
				got[s.Name] = s
			}
			if got["train"].Len != tc.train || got["dev"].Len != tc.dv || got["test"].Len != tc.tst || got["testall"].Len != tc.testall {
				t.Errorf("got %+v", sp)
			}
			if got["test"].Start != got["testall"].Start || got["test"].Of != "testall" {
				t.Errorf("test is not a prefix of testall: %+v", sp)
			}
			if got["testall"].Len+got["dev"].Len+got["train"].Len != tc.n || got["train"].Start+got["train"].Len != tc.n {
				t.Errorf("splits do not tile %d images: %+v", tc.n, sp)
			}
		})
	}
}

func ExampleAllocate() {
	splits, _ := Allocate(100, 0, 0)
	for _, s := range splits {
		fmt.Printf("%s: images %d..%d\n", s.Name, s.Start, s.Start+s.Len-1)
	}
	// Output:
	// testall: images 0..19
	// test: images 0..19
	// dev: images 20..39
	// train: images 40..99
}

// npyFile is the content of an npy file.
type npyFile struct {
	data []byte
}

// readNpy reads the npy file at path, checking that it holds exactly a
// little-endian C-order array of the given dtype and shape, with numpy's
// header layout: version 1.0 and the data aligned to 64 bytes.
func readNpy(t *testing.T, path string, dtype npy.DType, shape ...int) npyFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := npy.Header{DType: dtype, Shape: shape}
	hb := h.Bytes()
	if !bytes.HasPrefix(b, hb) || len(hb)%64 != 0 {
		t.Fatalf("%s: header %q, want %q", path, b[:min(len(b), len(hb))], hb)
	}
	data := b[len(hb):]
	if int64(len(data)) != h.DataSize() {
		t.Fatalf("%s: %d data bytes for %s", path, len(data), h)
	}
	return npyFile{data}
}

func (f npyFile) f32(i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(f.data[4*i:]))
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("%s: empty or no final newline", path)
	}
	return strings.Split(string(b[:len(b)-1]), "\n")
}

func generate(t *testing.T, cfg Config) (string, *World) {
	t.Helper()
	dir := t.TempDir()
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	return dir, w
}

func TestLayout(t *testing.T) {
	cfg := Config{N: 50, Seed: 5, Dim: 24, Regions: 10, Workers: 2}
	dir, w := generate(t, cfg)
	R, D := 10, 24
	for _, sp := range w.Splits() {
		N := sp.Len
		ims := readNpy(t, filepath.Join(dir, sp.Name+"_ims.npy"), npy.Float32, N, R, D)
		boxes := readNpy(t, filepath.Join(dir, sp.Name+"_boxes.npy"), npy.Float32, N, R, 4)
		sizes := readNpy(t, filepath.Join(dir, sp.Name+"_sizes.npy"), npy.Float32, N, 2)
		nreg := readNpy(t, filepath.Join(dir, sp.Name+"_nregions.npy"), npy.Int32, N)
		caps := readLines(t, filepath.Join(dir, sp.Name+"_caps.txt"))
		ids := readLines(t, filepath.Join(dir, sp.Name+"_ids.txt"))
		align := readLines(t, filepath.Join(dir, sp.Name+"_align.jsonl"))
		scenes := readLines(t, filepath.Join(dir, sp.Name+"_scenes.jsonl"))
		if len(caps) != 5*N || len(align) != 5*N || len(ids) != N || len(scenes) != N {
			t.Fatalf("%s: %d captions, %d align, %d ids, %d scenes for %d images", sp.Name, len(caps), len(align), len(ids), len(scenes), N)
		}
		for i := range N {
			if ids[i] != IDOf(sp.Start+i) {
				t.Errorf("%s: id %d is %q", sp.Name, i, ids[i])
			}
			nv := int(int32(binary.LittleEndian.Uint32(nreg.data[4*i:])))
			if nv < (3*R+3)/4 || nv > R {
				t.Errorf("%s image %d: %d valid regions", sp.Name, i, nv)
			}
			if sizes.f32(2*i) != ImageWidth || sizes.f32(2*i+1) != ImageHeight {
				t.Errorf("%s image %d: size %v x %v", sp.Name, i, sizes.f32(2*i), sizes.f32(2*i+1))
			}
			for r := range R {
				var bsum float32
				for q := range 4 {
					bsum += boxes.f32((i*R+r)*4 + q)
				}
				b := [4]float32{boxes.f32((i*R + r) * 4), boxes.f32((i*R+r)*4 + 1), boxes.f32((i*R+r)*4 + 2), boxes.f32((i*R+r)*4 + 3)}
				var fsum float64
				for d := range D {
					v := ims.f32((i*R+r)*D + d)
					if v < 0 || math.IsNaN(float64(v)) {
						t.Fatalf("%s image %d region %d: feature %v", sp.Name, i, r, v)
					}
					fsum += float64(v)
				}
				if r >= nv {
					if bsum != 0 || fsum != 0 || math.Signbit(float64(b[0])) {
						t.Fatalf("%s image %d: padded slot %d not zero", sp.Name, i, r)
					}
					continue
				}
				if !(b[0] >= 0 && b[1] >= 0 && b[2] <= ImageWidth && b[3] <= ImageHeight && b[2]-b[0] >= 3 && b[3]-b[1] >= 3) {
					t.Errorf("%s image %d region %d: box %v", sp.Name, i, r, b)
				}
				if fsum == 0 {
					t.Errorf("%s image %d region %d: all-zero feature", sp.Name, i, r)
				}
			}
		}
		// Lines of align.jsonl point at their caption and image.
		for k, line := range align {
			var rec alignRecord
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("%s align line %d: %v", sp.Name, k, err)
			}
			if rec.Caption != k || rec.Image != k/5 {
				t.Fatalf("%s align line %d: caption %d image %d", sp.Name, k, rec.Caption, rec.Image)
			}
		}
		var rec SceneRecord
		if err := json.Unmarshal([]byte(scenes[0]), &rec); err != nil || rec.ID != ids[0] || len(rec.Objects) < 2 {
			t.Errorf("%s scenes line 0: %v %+v", sp.Name, err, rec)
		}
		// PNGs decode to the rendered pixels.
		f, err := os.Open(filepath.Join(dir, "images", sp.Name, ids[N-1]+".png"))
		if err != nil {
			t.Fatal(err)
		}
		pic, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		img, err := w.Image(sp.Name, N-1)
		if err != nil {
			t.Fatal(err)
		}
		if pic.Bounds() != img.Pixels.Bounds() {
			t.Fatalf("%s: PNG bounds %v", sp.Name, pic.Bounds())
		}
		for y := range ImageHeight {
			for x := range ImageWidth {
				r1, g1, b1, a1 := pic.At(x, y).RGBA()
				r2, g2, b2, _ := img.Pixels.At(x, y).RGBA()
				if r1 != r2 || g1 != g2 || b1 != b2 || a1 != 0xffff {
					t.Fatalf("%s: PNG pixel %d,%d differs from the rendered one", sp.Name, x, y)
				}
			}
		}
		entries, _ := os.ReadDir(filepath.Join(dir, "images", sp.Name))
		if len(entries) != N {
			t.Errorf("%s: %d PNG files for %d images", sp.Name, len(entries), N)
		}
		// The features of the file are World.Features of the image.
		feat := w.Features(img)
		for k, v := range feat {
			if got := ims.f32((N-1)*R*D + k); got != v {
				t.Fatalf("%s: feature %d of the last image is %v in the file, %v from Features", sp.Name, k, got, v)
			}
		}
	}
	// Here test is all of testall (10 images): the files are the same.
	for _, suffix := range fileSuffixes {
		a, _ := os.ReadFile(filepath.Join(dir, "test"+suffix))
		b, _ := os.ReadFile(filepath.Join(dir, "testall"+suffix))
		if !bytes.Equal(a, b) {
			t.Errorf("test%s differs from testall%s", suffix, suffix)
		}
	}
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, "world.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Dim != D || m.Regions != R || m.Seed != 5 || len(m.Extractor.Stats) != StatsDim || len(m.Splits) != 4 || m.Extractor.Version != ExtractorVersion {
		t.Errorf("world.json: %+v", m)
	}
}

// TestTestPrefix checks test = first 1000 images of testall when testall is
// larger, through an independent npy reader.
func TestTestPrefix(t *testing.T) {
	if testing.Short() {
		t.Skip("1200 images")
	}
	dir, _ := generate(t, Config{N: 1300, Seed: 2, Dim: 8, Regions: 8, Test: 1050, Dev: 50, NoImages: true})
	read := func(name string) ([]float32, []int) {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := npyio.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		var data []float32
		if err := r.Read(&data); err != nil {
			t.Fatal(err)
		}
		return data, r.Header.Descr.Shape
	}
	test, ts := read("test_ims.npy")
	all, as := read("testall_ims.npy")
	if !slices.Equal(ts, []int{1000, 8, 8}) || !slices.Equal(as, []int{1050, 8, 8}) {
		t.Fatalf("shapes %v and %v", ts, as)
	}
	if !slices.Equal(test, all[:len(test)]) {
		t.Error("test features are not the first 1000 images of testall")
	}
	tc := readLines(t, filepath.Join(dir, "test_caps.txt"))
	ac := readLines(t, filepath.Join(dir, "testall_caps.txt"))
	if len(tc) != 5000 || !slices.Equal(tc, ac[:5000]) {
		t.Error("test captions are not the first 5000 of testall")
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestDeterministic(t *testing.T) {
	cfg := Config{N: 40, Seed: 11, Dim: 40, Regions: 12}
	cfg.Workers = 1
	d1, _ := generate(t, cfg)
	cfg.Workers = 5
	restore := SingleThreadBLAS() // BLAS threading must not matter either
	d2, _ := generate(t, cfg)
	restore()
	a, b := readTree(t, d1), readTree(t, d2)
	if len(a) != len(b) || len(a) < 30+40 {
		t.Fatalf("%d and %d files", len(a), len(b))
	}
	for name, content := range a {
		if !bytes.Equal(content, b[name]) {
			t.Errorf("%s differs between 1 and 5 workers", name)
		}
	}
	cfg.Seed = 12
	d3, _ := generate(t, cfg)
	c := readTree(t, d3)
	if bytes.Equal(a["train_ims.npy"], c["train_ims.npy"]) || bytes.Equal(a["train_caps.txt"], c["train_caps.txt"]) {
		t.Error("seeds 11 and 12 give the same world")
	}
	// Regenerating into the same directory replaces everything.
	w, _ := New(cfg)
	if _, err := w.Write(context.Background(), d1); err != nil {
		t.Fatal(err)
	}
	again := readTree(t, d1)
	for name, content := range c {
		if !bytes.Equal(content, again[name]) {
			t.Errorf("%s: regenerated world differs", name)
		}
	}
	if len(again) != len(c) {
		t.Errorf("%d files after regenerating, want %d", len(again), len(c))
	}
}

func TestCancel(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Generate(ctx, dir, Config{N: 100, Seed: 1, Dim: 16}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: err %v", err)
	}
	assertEmpty(t, dir)

	// Cancel in the middle of a run.
	ctx, cancel = context.WithCancel(context.Background())
	w, _ := New(Config{N: 1500, Seed: 1, Dim: 16, Workers: 2})
	done := make(chan error)
	go func() {
		_, err := w.Write(ctx, dir)
		done <- err
	}()
	for { // wait until the dev split is being written
		entries, _ := os.ReadDir(filepath.Join(dir, "images"))
		if slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), ".dev.tmp-") }) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: err %v", err)
	}
	assertEmpty(t, dir)
}

// assertEmpty checks that dir is empty: no file, temporary or final, and
// no directory.
func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != lockfile.Name {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// TestStaleTemporaries plants what a killed run leaves (temporary files and
// image directories of Write's naming) beside files of other names: a new
// run removes the first and keeps the others.
func TestStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	stale := []string{".train_ims.npy.tmp-123", ".test_caps.txt.tmp-9", ".world.json.tmp-1", "images/.dev.tmp-77/x.png", "images/.train.old-5/y.png"}
	keep := []string{".notes.tmp-1", "mine.txt", "images/.cache/z"}
	for _, p := range append(append([]string{}, stale...), keep...) {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, 100), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Generate(context.Background(), dir, Config{N: 100, Seed: 1, Dim: 16, Regions: 6, NoImages: true}); err != nil {
		t.Fatal(err)
	}
	for _, p := range stale {
		top := strings.SplitN(p, "/", 3)
		p = filepath.Join(dir, top[0])
		if len(top) == 3 {
			p = filepath.Join(dir, top[0], top[1])
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("stale %s survived: %v", p, err)
		}
	}
	for _, p := range keep {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	// A second writer of the same directory is refused.
	l, err := lockfile.Acquire(dir, "world directory")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err := Generate(context.Background(), dir, Config{N: 100, Seed: 1, Dim: 16, Regions: 6, NoImages: true}); !errors.Is(err, lockfile.ErrLocked) {
		t.Fatalf("Generate into a locked directory: %v", err)
	}
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{N: 2},
		{N: 100, Regions: 3},
		{N: 100, Dim: -1},
		{N: 100, Dev: -1},
		{N: 100, Noise: -0.5},
		{N: 10, Dev: 5, Test: 5},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("no error for %+v", cfg)
		}
	}
}
