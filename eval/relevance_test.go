package eval

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/xmr-project/xmr/atomicfile"
)

func TestComputeRelevanceRoundTrip(t *testing.T) {
	caps := randomCaptions(rand.New(rand.NewPCG(1, 1)), 5*23)
	out := filepath.Join(t.TempDir(), "rel.bin")
	if err := ComputeRelevance(context.Background(), RougeLMetric{}, caps, 5, out, RelevanceOptions{ChunkRows: 7, Quiet: true}); err != nil {
		t.Fatal(err)
	}
	rel, err := ReadRelevance(out, len(caps), 23)
	if err != nil {
		t.Fatal(err)
	}
	for i := range caps {
		for j := 0; j < 23; j++ {
			if want := float32(RougeL(caps[i], caps[5*j:5*j+5])); rel.At(i, j) != want {
				t.Fatalf("rel[%d, %d] = %v, want %v", i, j, rel.At(i, j), want)
			}
		}
		if rel.At(i, i/5) != 1 {
			t.Errorf("rel[%d, own image] = %v, want 1 (the caption is among its image's references)", i, rel.At(i, i/5))
		}
	}
	for _, p := range []string{out + ".partial", out + ".partial.json"} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind (err %v)", p, err)
		}
	}
}

// cancelling wraps a metric and cancels a context after a number of scored
// rows; hideRows hides the RowScorer fast path.
type cancelling struct {
	m        Metric
	cancel   context.CancelFunc
	after    int64
	hideRows bool
}

func (c *cancelling) Name() string { return c.m.Name() }

func (c *cancelling) Prepare(ctx context.Context, caps []string, per int) (Scorer, error) {
	s, err := c.m.Prepare(ctx, caps, per)
	if err != nil {
		return nil, err
	}
	cs := &cancelScorer{s: s.(RowScorer), c: c, nImg: len(caps) / per}
	if c.hideRows {
		return pairOnly{cs}, nil
	}
	return cs, nil
}

type cancelScorer struct {
	s     RowScorer
	c     *cancelling
	nImg  int
	count atomic.Int64
}

func (s *cancelScorer) Score(i, j int) float32 {
	if j == 0 && s.count.Add(1) == s.c.after {
		s.c.cancel()
	}
	return s.s.Score(i, j)
}

func (s *cancelScorer) ScoreRows(ctx context.Context, i0, i1 int, out []float32) error {
	if s.count.Add(int64(i1-i0)) >= s.c.after {
		s.c.cancel()
	}
	return s.s.ScoreRows(ctx, i0, i1, out)
}

type pairOnly struct{ s Scorer }

func (p pairOnly) Score(i, j int) float32 { return p.s.Score(i, j) }

func TestComputeRelevanceResume(t *testing.T) {
	caps := randomCaptions(rand.New(rand.NewPCG(2, 2)), 5*40)
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.bin")
	if err := ComputeRelevance(context.Background(), RougeLMetric{}, caps, 5, ref, RelevanceOptions{Quiet: true}); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		hideRows bool
		after    int64
		workers  int
	}{
		{"rows", false, 60, 3},
		{"pairs", true, 90, 2},
		{"pairs early", true, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".bin")
			opts := RelevanceOptions{ChunkRows: 9, SyncEvery: -1, Workers: tc.workers, Quiet: true}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			m := &cancelling{m: RougeLMetric{}, cancel: cancel, after: tc.after, hideRows: tc.hideRows}
			err := ComputeRelevance(ctx, m, caps, 5, out, opts)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted run: err = %v, want context.Canceled", err)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("output exists after an interrupted run (err %v)", err)
			}
			st, err := os.Stat(out + ".partial")
			if err != nil {
				t.Fatal(err)
			}
			if st.Size()%(40*4) != 0 || st.Size() >= int64(len(want)) {
				t.Fatalf("partial file has %d bytes: want whole rows, fewer than %d", st.Size(), len(want))
			}
			// Some garbage after the recorded rows, as a crash could leave.
			f, err := os.OpenFile(out+".partial", os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte{1, 2, 3, 4, 5, 6})
			f.Close()

			// A different job is refused.
			other := append([]string{"something else"}, caps[1:]...)
			if err := ComputeRelevance(context.Background(), RougeLMetric{}, other, 5, out, opts); err == nil || !strings.Contains(err.Error(), "different job") {
				t.Fatalf("resuming with other captions: err = %v, want a different-job error", err)
			}
			if err := ComputeRelevance(context.Background(), RougeLMetric{}, caps, 5, out, opts); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("resumed file differs from an uninterrupted run")
			}
		})
	}
}

func TestReadRelevanceSize(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rel.bin")
	if err := os.WriteFile(p, make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadRelevance(p, 5, 6)
	if err == nil {
		t.Fatal("want a size error")
	}
	for _, s := range []string{p, "expected 120 bytes", "found 100 bytes"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
}

func TestLookupMetric(t *testing.T) {
	m, err := LookupMetric("rouge-l")
	if err != nil || m.Name() != "rouge-l" {
		t.Fatalf("LookupMetric(rouge-l) = %v, %v", m, err)
	}
	_, err = LookupMetric("bleu")
	if err == nil || !strings.Contains(err.Error(), "rouge-l") || !strings.Contains(err.Error(), `"bleu"`) {
		t.Errorf("unknown metric error %v should name it and list the known ones", err)
	}
}

func TestNPYRoundTrip(t *testing.T) {
	m := randomMatrix(rand.New(rand.NewPCG(3, 3)), 3, 7, 100)
	var buf bytes.Buffer
	if err := WriteNPY(&buf, m); err != nil {
		t.Fatal(err)
	}
	if buf.Len()%64 != 7*3*4%64 {
		t.Errorf("header is not 64-byte aligned")
	}
	p := filepath.Join(t.TempDir(), "m.npy")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadNPY(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != 3 || got.Cols != 7 || !bytes.Equal(f32bytes(got.Data), f32bytes(m.Data)) {
		t.Errorf("round trip changed the matrix")
	}
	// A truncated file is named, with both sizes.
	if err := os.WriteFile(p, buf.Bytes()[:buf.Len()-4], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadNPY(p); err == nil || !strings.Contains(err.Error(), "truncated") || !strings.Contains(err.Error(), p) {
		t.Errorf("truncated npy: err = %v", err)
	}
}

func TestDecodeNPYVariants(t *testing.T) {
	hdr := func(dict string) []byte {
		b := []byte("\x93NUMPY\x01\x00")
		b = append(b, byte(len(dict)+1), 0)
		return append(append(b, dict...), '\n')
	}
	tests := []struct {
		name string
		data []byte
		want []float32 // 2 x 2
	}{
		{"f8 little", append(hdr("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }"),
			0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0x08, 0x40, 0, 0, 0, 0, 0, 0, 0x10, 0x40), []float32{1, 2, 3, 4}},
		{"f4 big fortran", append(hdr("{'descr': '>f4', 'fortran_order': True, 'shape': (2, 2)}"),
			0x3f, 0x80, 0, 0, 0x40, 0x40, 0, 0, 0x40, 0, 0, 0, 0x40, 0x80, 0, 0), []float32{1, 2, 3, 4}},
	}
	for _, tc := range tests {
		m, err := DecodeNPY(bytes.NewReader(tc.data))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if m.Rows != 2 || m.Cols != 2 || !bytes.Equal(f32bytes(m.Data), f32bytes(tc.want)) {
			t.Errorf("%s: got %v %dx%d, want %v", tc.name, m.Data, m.Rows, m.Cols, tc.want)
		}
	}
	for _, bad := range []string{
		"{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
		"{'descr': '<f4', 'shape': (2, 2), }",
	} {
		if _, err := DecodeNPY(bytes.NewReader(append(hdr(bad), make([]byte, 16)...))); err == nil {
			t.Errorf("header %s: want an error", bad)
		}
	}
}

func f32bytes(v []float32) []byte {
	var b bytes.Buffer
	writeFloat32LE(&b, v)
	return b.Bytes()
}

func FuzzDecodeNPY(f *testing.F) {
	var buf bytes.Buffer
	WriteNPY(&buf, randomMatrix(rand.New(rand.NewPCG(1, 1)), 2, 3, 10))
	f.Add(buf.Bytes())
	f.Add([]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{'shape': (1,1)}"))
	f.Add([]byte("\x93NUMPY\x01\x00\x3c\x00{'descr': '<f8', 'fortran_order': True, 'shape': (9999999, 9999999), }\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeNPY(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(m.Data) != m.Rows*m.Cols {
			t.Fatalf("%d values for %d x %d", len(m.Data), m.Rows, m.Cols)
		}
		// What decodes re-encodes and decodes to the same values.
		var out bytes.Buffer
		if err := WriteNPY(&out, m); err != nil {
			t.Fatal(err)
		}
		m2, err := DecodeNPY(&out)
		if err != nil || !bytes.Equal(f32bytes(m2.Data), f32bytes(m.Data)) {
			t.Fatalf("re-encoded matrix does not round-trip: %v", err)
		}
	})
}

func FuzzDecodeRelevance(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0}, 1, 2)
	f.Add([]byte{1, 2, 3}, 1, 1)
	f.Add([]byte{}, 0, 5)
	f.Fuzz(func(t *testing.T, b []byte, nc, ni int) {
		m, err := decodeRelevance(bytes.NewReader(b), int64(len(b)), nc, ni)
		if err != nil {
			return
		}
		if m.Rows != nc || m.Cols != ni || 4*len(m.Data) != len(b) || !bytes.Equal(f32bytes(m.Data), b) {
			t.Fatalf("decoded %d x %d from %d bytes", m.Rows, m.Cols, len(b))
		}
	})
}

// TestComputeRelevancePublish: the finished matrix goes through
// atomicfile's rules: an out that is a symbolic link to a regular file is
// written through and stays a link; an out that is a directory is
// refused before any work, with nothing written beside it.
func TestComputeRelevancePublish(t *testing.T) {
	caps := randomCaptions(rand.New(rand.NewPCG(2, 2)), 5*4)
	dir := t.TempDir()
	other := t.TempDir()
	target := filepath.Join(other, "rel.bin")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "rel.bin")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := ComputeRelevance(context.Background(), RougeLMetric{}, caps, 5, link, RelevanceOptions{Quiet: true}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("--out's link is now %v (%v), want it kept", fi.Mode(), err)
	}
	if _, err := ReadRelevance(target, len(caps), 4); err != nil {
		t.Errorf("the link's file: %v", err)
	}

	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	err := ComputeRelevance(context.Background(), RougeLMetric{}, caps, 5, sub, RelevanceOptions{Quiet: true})
	var nre *atomicfile.NotRegularError
	if !errors.As(err, &nre) || !strings.Contains(err.Error(), "a directory") {
		t.Errorf("out a directory: %v, want a NotRegularError naming it a directory", err)
	}
	for _, p := range []string{sub + ".partial", sub + ".partial.json"} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s written (%v): the refusal must come before any work", p, err)
		}
	}
}
