package eval

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/progress"
)

// A Metric measures how well one caption describes an image described by reference captions.
type Metric interface {
	Name() string
	// Prepare analyses all captions once (perImage consecutive captions per image) and returns a Scorer safe for concurrent use.
	Prepare(ctx context.Context, captions []string, perImage int) (Scorer, error)
}

// Scorer returns tau(caption i, the captions of image j).
type Scorer interface{ Score(i, j int) float32 }

// RowScorer is an optional interface of a Scorer that computes whole rows
// of the relevance matrix faster than pair by pair; ComputeRelevance uses
// it when present. ScoreRows must write Score(i, j) to
// out[(i-i0)*nImages+j] for i in [i0, i1) and every image j, and be safe
// for concurrent calls on disjoint rows. It checks ctx often enough to stop
// within a fraction of a second, however long the captions, and then
// returns ctx's error with out partly written.
type RowScorer interface {
	Scorer
	ScoreRows(ctx context.Context, i0, i1 int, out []float32) error
}

var (
	metricsMu sync.Mutex
	metrics   = map[string]func() (Metric, error){}
)

// RegisterMetric makes a relevance metric available by name to LookupMetric
// (and so to "xmr relevance --metric NAME"). Packages register from init;
// a duplicate name panics, as it is a programming error.
func RegisterMetric(name string, factory func() (Metric, error)) {
	metricsMu.Lock()
	defer metricsMu.Unlock()
	if _, dup := metrics[name]; dup {
		panic("eval: duplicate relevance metric " + name)
	}
	metrics[name] = factory
}

// MetricNames returns the registered metric names, sorted.
func MetricNames() []string {
	metricsMu.Lock()
	defer metricsMu.Unlock()
	names := make([]string, 0, len(metrics))
	for n := range metrics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LookupMetric creates the metric registered under name; an unknown name
// is an error that lists the known ones.
func LookupMetric(name string) (Metric, error) {
	metricsMu.Lock()
	f, ok := metrics[name]
	metricsMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("unknown relevance metric %q (known: %s)", name, strings.Join(MetricNames(), ", "))
	}
	m, err := f()
	if err != nil {
		return nil, fmt.Errorf("relevance metric %s: %w", name, err)
	}
	return m, nil
}

// RelevanceOptions tune ComputeRelevance; the zero value is ready to use.
type RelevanceOptions struct {
	// Workers is the number of goroutines scoring rows; default GOMAXPROCS.
	Workers int
	// ChunkRows is the number of rows (captions) per unit of work and per
	// write; default: about a million pairs per chunk.
	ChunkRows int
	// SyncEvery is how often finished rows are fsynced and recorded in the
	// sidecar, the granularity of resuming; default 10 s. Negative means
	// after every chunk.
	SyncEvery time.Duration
	// Quiet turns off the progress bar.
	Quiet bool
}

// relevanceState is the sidecar out+".partial.json" of an interrupted run.
type relevanceState struct {
	Version   int    `json:"version"`
	Metric    string `json:"metric"`
	Inputs    string `json:"inputs_sha256"` // metric name, captions per image and captions
	Captions  int    `json:"captions"`
	Images    int    `json:"images"`
	PerImage  int    `json:"per_image"`
	RowsDone  int    `json:"rows_done"`
	UpdatedAt string `json:"updated_at"`
}

const relevanceStateVersion = 1

// relevanceInputsHash identifies a relevance job: a partial file is only
// resumed by the same metric on the same captions.
func relevanceInputsHash(metric string, captions []string, perImage int) string {
	h := sha256.New()
	var b [binary.MaxVarintLen64]byte
	put := func(s string) {
		h.Write(b[:binary.PutUvarint(b[:], uint64(len(s)))])
		io.WriteString(h, s)
	}
	put("xmr relevance v1")
	put(metric)
	h.Write(b[:binary.PutUvarint(b[:], uint64(perImage))])
	h.Write(b[:binary.PutUvarint(b[:], uint64(len(captions)))])
	for _, c := range captions {
		put(c)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ComputeRelevance writes the relevance matrix of metric m over captions
// (perImage consecutive captions per image) to out in TERAN's raw layout:
// n_captions x n_images little-endian float32, row-major, no header; entry
// [i, j] is tau(caption i, the captions of image j), caption i's own image
// included (its captions then include caption i itself, as in TERAN's
// compute_relevance.py).
//
// Rows are scored in parallel and appended in order to out+".partial";
// every opts.SyncEvery the file is fsynced and the number of finished rows
// recorded in the sidecar out+".partial.json", together with a hash of the
// metric name and the captions. When the context is cancelled,
// ComputeRelevance saves what is finished and returns the context's error;
// a later call with the same metric and captions continues from there, and
// one with different inputs is refused (remove the two partial files to
// start over). At the end the partial file is given the name out by
// atomicfile.Publish: a symbolic link to a regular file is written
// through and kept, and an out that exists and is neither a regular file
// nor a FIFO or terminal is refused, before any work.
func ComputeRelevance(ctx context.Context, m Metric, captions []string, perImage int, out string, opts RelevanceOptions) error {
	name := m.Name()
	if perImage <= 0 || len(captions) == 0 || len(captions)%perImage != 0 {
		return fmt.Errorf("relevance %s: %d captions is not a positive multiple of %d captions per image", name, len(captions), perImage)
	}
	nCap, nImg := len(captions), len(captions)/perImage
	state := relevanceState{
		Version: relevanceStateVersion, Metric: name, Inputs: relevanceInputsHash(name, captions, perImage),
		Captions: nCap, Images: nImg, PerImage: perImage,
	}
	partial, sidecar := out+".partial", out+".partial.json"
	// Refuse, before any work, what the end could not replace (package
	// atomicfile's rules): an OUT, OUT.partial or OUT.partial.json that
	// is a device node, a socket or a directory; OUT.partial and the
	// sidecar must also not be a FIFO, being read back to resume.
	for _, p := range []string{out, partial, sidecar} {
		if fi, err := os.Stat(p); err == nil && !fi.Mode().IsRegular() && (p != out || !atomicfile.IsStream(fi)) {
			return fmt.Errorf("relevance %s: %w", name, &atomicfile.NotRegularError{Path: p, Mode: fi.Mode()})
		}
	}
	f, done, err := openPartial(partial, sidecar, &state)
	if err != nil {
		return err
	}
	defer func() {
		if f != nil {
			f.Close()
		}
	}()

	scorer, err := m.Prepare(ctx, captions, perImage)
	if err != nil {
		return fmt.Errorf("relevance %s: prepare: %w", name, err)
	}

	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	chunk := opts.ChunkRows
	if chunk <= 0 {
		chunk = max(1, (1<<20)/nImg)
	}
	syncEvery := opts.SyncEvery
	if syncEvery == 0 {
		syncEvery = 10 * time.Second
	}
	var bar *progress.Bar
	if !opts.Quiet && done < nCap {
		bar = progress.New("relevance "+name, int64(nCap-done)*int64(nImg), "pairs")
		if done > 0 {
			bar.Describe(fmt.Sprintf("(resumed at caption %d of %d)", done, nCap))
		}
	}

	// Workers take chunks in order and hand them to this goroutine, which
	// appends them to the file in order. At most 2*workers chunks are in
	// flight, which bounds memory when one chunk is slow.
	type result struct {
		k    int
		rows []float32
	}
	start := done
	nChunks := (nCap - start + chunk - 1) / chunk
	rowsOf := func(k int) (int, int) {
		i0 := start + k*chunk
		return i0, min(i0+chunk, nCap)
	}
	tokens := make(chan struct{}, 2*workers)
	results := make(chan result)
	free := make(chan []float32, 2*workers) // recycled chunk buffers
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var next atomic.Int64
	var wg sync.WaitGroup
	rs, fast := scorer.(RowScorer)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case tokens <- struct{}{}:
				case <-wctx.Done():
					return
				}
				k := int(next.Add(1) - 1)
				if k >= nChunks || wctx.Err() != nil {
					<-tokens
					return
				}
				i0, i1 := rowsOf(k)
				var buf []float32
				select {
				case buf = <-free:
				default:
					buf = make([]float32, chunk*nImg)
				}
				buf = buf[:(i1-i0)*nImg]
				if fast {
					// A chunk cut short by the context (the only error) is
					// dropped, never written.
					if rs.ScoreRows(wctx, i0, i1, buf) != nil {
						<-tokens
						return
					}
					bar.Add(int64(i1-i0) * int64(nImg))
				} else {
					for i := i0; i < i1; i++ {
						if wctx.Err() != nil {
							<-tokens
							return
						}
						row := buf[(i-i0)*nImg : (i-i0+1)*nImg]
						for j := range row {
							row[j] = scorer.Score(i, j)
						}
						bar.Add(int64(nImg))
					}
				}
				select {
				case results <- result{k, buf}:
				case <-wctx.Done():
					<-tokens
					return
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(results)
	}()

	bw := bufio.NewWriterSize(f, 1<<20)
	save := func() error {
		if err := bw.Flush(); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		state.RowsDone = done
		return writeRelevanceState(sidecar, state)
	}
	pending := map[int][]float32{}
	nextK := 0
	lastSync := time.Now()
	var werr error
	for r := range results {
		if werr != nil {
			<-tokens
			continue
		}
		pending[r.k] = r.rows
		for {
			rows, ok := pending[nextK]
			if !ok {
				break
			}
			delete(pending, nextK)
			if werr = writeFloat32LE(bw, rows); werr != nil {
				werr = fmt.Errorf("relevance %s: write %s: %w", name, partial, werr)
				stop()
				break
			}
			select {
			case free <- rows[:cap(rows)]:
			default:
			}
			_, i1 := rowsOf(nextK)
			done = i1
			nextK++
			<-tokens
			if syncEvery < 0 || time.Since(lastSync) >= syncEvery {
				if werr = save(); werr != nil {
					werr = fmt.Errorf("relevance %s: save progress to %s: %w", name, partial, werr)
					stop()
					break
				}
				lastSync = time.Now()
			}
		}
	}
	if werr != nil {
		return werr
	}
	if err := save(); err != nil {
		return fmt.Errorf("relevance %s: save progress to %s: %w", name, partial, err)
	}
	if done < nCap {
		cause := context.Cause(ctx)
		if cause == nil {
			cause = errors.New("incomplete")
		}
		return fmt.Errorf("relevance %s: stopped after %d of %d captions (rerun to resume): %w", name, done, nCap, cause)
	}
	bar.Finish()
	if err := f.Close(); err != nil {
		return fmt.Errorf("relevance %s: close %s: %w", name, partial, err)
	}
	f = nil
	if err := atomicfile.Publish(partial, out); err != nil {
		return fmt.Errorf("relevance %s: %w", name, err)
	}
	if err := os.Remove(sidecar); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("relevance %s: %w", name, err)
	}
	return nil
}

// openPartial opens (creating or resuming) the partial output and returns
// it positioned after the rows already done.
func openPartial(partial, sidecar string, want *relevanceState) (*os.File, int, error) {
	rowBytes := int64(want.Images) * 4
	done := 0
	b, err := infile.ReadFile(sidecar)
	switch {
	case err == nil:
		var st relevanceState
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, 0, fmt.Errorf("relevance: read %s: %w (remove it and %s to start over)", sidecar, err, partial)
		}
		if st.Version != want.Version || st.Metric != want.Metric || st.Inputs != want.Inputs ||
			st.Captions != want.Captions || st.Images != want.Images || st.PerImage != want.PerImage {
			return nil, 0, fmt.Errorf("relevance: %s belongs to a different job (metric %s, %d captions, %d per image, inputs %.12s) than this one (metric %s, %d captions, %d per image, inputs %.12s); remove %s and %s to start over",
				partial, st.Metric, st.Captions, st.PerImage, st.Inputs, want.Metric, want.Captions, want.PerImage, want.Inputs, partial, sidecar)
		}
		done = max(0, min(st.RowsDone, want.Captions))
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, 0, fmt.Errorf("relevance: %w", err)
	}
	f, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("relevance: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("relevance: %w", err)
	}
	// Rows past the recorded count may be incomplete: drop them. A file
	// shorter than recorded (it should not happen: the data is synced
	// before the sidecar) resumes from its last whole row.
	done = min(done, int(st.Size()/rowBytes))
	if err := f.Truncate(int64(done) * rowBytes); err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("relevance: %w", err)
	}
	if _, err := f.Seek(int64(done)*rowBytes, io.SeekStart); err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("relevance: %w", err)
	}
	return f, done, nil
}

func writeRelevanceState(path string, st relevanceState) error {
	st.UpdatedAt = time.Now().UTC().Format(time.RFC3339)
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, append(b, '\n'))
}

// ReadRelevance reads a relevance matrix of nCaptions x nImages in TERAN's
// raw layout (little-endian float32, row-major, no header), as written by
// ComputeRelevance or TERAN's compute_relevance.py. The file size must be
// exactly nCaptions*nImages*4 bytes; the error names the file and both
// sizes. The whole matrix is read into memory (500 MB for COCO 5K).
func ReadRelevance(path string, nCaptions, nImages int) (*Matrix, error) {
	f, err := infile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read relevance: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read relevance %s: %w", path, err)
	}
	m, err := decodeRelevance(f, st.Size(), nCaptions, nImages)
	if err != nil {
		return nil, fmt.Errorf("read relevance %s: %w", path, err)
	}
	return m, nil
}

// decodeRelevance reads a raw relevance matrix of size bytes from r.
func decodeRelevance(r io.Reader, size int64, nCaptions, nImages int) (*Matrix, error) {
	if nCaptions <= 0 || nImages <= 0 {
		return nil, fmt.Errorf("bad shape %d captions x %d images", nCaptions, nImages)
	}
	want := int64(nCaptions) * int64(nImages) * 4
	if size != want {
		return nil, fmt.Errorf("expected %d bytes (%d captions x %d images x 4-byte float32), found %d bytes", want, nCaptions, nImages, size)
	}
	m := NewMatrix(nCaptions, nImages)
	if err := readFloat32LE(bufio.NewReaderSize(r, 1<<20), m.Data); err != nil {
		return nil, err
	}
	return m, nil
}

// writeFloat32LE writes v as little-endian float32 values.
func writeFloat32LE(w io.Writer, v []float32) error {
	const chunk = 1 << 16
	buf := make([]byte, 4*min(chunk, len(v)))
	for len(v) > 0 {
		k := min(chunk, len(v))
		for i, x := range v[:k] {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
		}
		if _, err := w.Write(buf[:4*k]); err != nil {
			return err
		}
		v = v[k:]
	}
	return nil
}

// readFloat32LE fills dst with little-endian float32 values from r.
func readFloat32LE(r io.Reader, dst []float32) error {
	const chunk = 1 << 16
	buf := make([]byte, 4*min(chunk, len(dst)))
	for len(dst) > 0 {
		k := min(chunk, len(dst))
		if _, err := io.ReadFull(r, buf[:4*k]); err != nil {
			return err
		}
		for i := range dst[:k] {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
		dst = dst[k:]
	}
	return nil
}
