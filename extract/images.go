package extract

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/internal/infile"
	"github.com/xmr-project/xmr/npy"
)

// ImageSet is the split of an index-only collection: images without
// captions, as Build writes them for a folder of photos.
type ImageSet struct {
	Name string
	// Images holds the features: (N, R, D) regions with boxes, or one
	// global vector per image (R = 1) when Global.
	Images *data.Regions
	Global bool
	// IDs and Sizes hold one id and one width, height per image.
	IDs   []string
	Sizes [][2]float32
}

// writeImages writes an index-only split (s.Captions nil) to dir: the
// precomp files without {split}_caps.txt, all renamed into place together.
func writeImages(ctx context.Context, dir string, s *data.Split) (err error) {
	g := s.Images
	base := filepath.Join(dir, s.Name)
	var batch atomicfile.Batch
	defer func() {
		if err != nil {
			batch.Abort()
		}
	}()
	stage := func(path string, write func(w io.Writer) error) error {
		return batch.Add(ctx, path, write)
	}
	shape := []int{g.N, g.R, g.D}
	if s.Global {
		shape = []int{g.N, g.D}
	}
	if err := stage(base+"_ims.npy", func(w io.Writer) error { return npy.Write(w, shape, g.Feat) }); err != nil {
		return err
	}
	sizes := make([]float32, 0, 2*g.N)
	for _, wh := range s.Sizes {
		sizes = append(sizes, wh[0], wh[1])
	}
	if err := stage(base+"_sizes.npy", func(w io.Writer) error { return npy.Write(w, []int{g.N, 2}, sizes) }); err != nil {
		return err
	}
	if err := stage(base+"_ids.txt", func(w io.Writer) error {
		for _, id := range s.ImageIDs {
			if strings.ContainsAny(id, "\r\n") {
				return fmt.Errorf("image id %q contains a line break", id)
			}
			if _, err := io.WriteString(w, id+"\n"); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if !s.Global {
		counts := make([]int32, g.N)
		for i := range counts {
			counts[i] = int32(g.NumRegions(i))
		}
		if err := stage(base+"_nregions.npy", func(w io.Writer) error { return npy.Write(w, []int{g.N}, counts) }); err != nil {
			return err
		}
		px := make([]float32, len(g.Boxes))
		for i := range g.N {
			for j := i * g.R * 4; j < (i+1)*g.R*4; j++ {
				px[j] = g.Boxes[j] * s.Sizes[i][j%2]
			}
		}
		if err := stage(base+"_boxes.npy", func(w io.Writer) error { return npy.Write(w, []int{g.N, g.R, 4}, px) }); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	if err := batch.Commit(); err != nil {
		return err
	}
	// A caption file of an earlier, captioned extraction would pair with
	// the wrong images.
	if err := os.Remove(base + "_caps.txt"); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// IsIndexOnly reports whether split of the extracted data set in dir is an
// index-only one (written without captions, as FileName records).
func IsIndexOnly(dir, split string) bool {
	r, err := ReadRecord(dir)
	if err != nil || r == nil {
		return false
	}
	sr, ok := r.Splits[split]
	return ok && !sr.Captions
}

// LoadImages reads an index-only split that Build wrote to dir. Errors
// name the file.
func LoadImages(dir, split string) (*ImageSet, error) {
	base := filepath.Join(dir, split)
	ims, err := npy.Read(base + "_ims.npy")
	if err != nil {
		return nil, err
	}
	s := &ImageSet{Name: split}
	g := &data.Regions{Feat: ims.Data}
	switch len(ims.Shape) {
	case 2:
		g.N, g.R, g.D = ims.Shape[0], 1, ims.Shape[1]
		s.Global = true
	case 3:
		g.N, g.R, g.D = ims.Shape[0], ims.Shape[1], ims.Shape[2]
	default:
		return nil, fmt.Errorf("read %s_ims.npy: shape %s: want (N,R,D) or (N,D)", base, npy.FormatShape(ims.Shape))
	}
	s.Images = g
	b, err := infile.ReadFile(base + "_ids.txt")
	if err != nil {
		return nil, fmt.Errorf("read %s_ids.txt: %w", base, unwrapPath(err))
	}
	s.IDs = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if g.N == 0 {
		s.IDs = nil
	}
	if len(s.IDs) != g.N {
		return nil, fmt.Errorf("read %s_ids.txt: %d ids for %d images", base, len(s.IDs), g.N)
	}
	sz, err := npy.Read(base + "_sizes.npy")
	if err != nil {
		return nil, err
	}
	if len(sz.Shape) != 2 || sz.Shape[0] != g.N || sz.Shape[1] != 2 {
		return nil, fmt.Errorf("read %s_sizes.npy: shape %s: want (%d,2)", base, npy.FormatShape(sz.Shape), g.N)
	}
	for i := range g.N {
		w, h := sz.Data[2*i], sz.Data[2*i+1]
		if !(w > 0 && h > 0) {
			return nil, fmt.Errorf("read %s_sizes.npy: image %d has size %v x %v", base, i, w, h)
		}
		s.Sizes = append(s.Sizes, [2]float32{w, h})
	}
	g.Count = make([]int, g.N)
	if s.Global {
		for i := range g.Count {
			g.Count[i] = 1
		}
		return s, g.Validate()
	}
	nf, err := npy.Open(base + "_nregions.npy")
	if err != nil {
		return nil, err
	}
	counts, err := nf.ReadInts()
	nf.Close()
	if err != nil {
		return nil, err
	}
	if len(counts) != g.N {
		return nil, fmt.Errorf("read %s_nregions.npy: %d counts for %d images", base, len(counts), g.N)
	}
	for i, c := range counts {
		if c < 0 || c > g.R {
			return nil, fmt.Errorf("read %s_nregions.npy: image %d has %d regions, outside [0,%d]", base, i, c, g.R)
		}
		if c == 0 {
			return nil, fmt.Errorf("read %s_nregions.npy: image %d (id %s) has 0 regions: %w", base, i, s.IDs[i], data.ErrNoRegions)
		}
		g.Count[i] = c
	}
	bx, err := npy.Read(base + "_boxes.npy")
	if err != nil {
		return nil, err
	}
	if len(bx.Shape) != 3 || bx.Shape[0] != g.N || bx.Shape[1] != g.R || bx.Shape[2] != 4 {
		return nil, fmt.Errorf("read %s_boxes.npy: shape %s: want (%d,%d,4)", base, npy.FormatShape(bx.Shape), g.N, g.R)
	}
	g.Boxes = make([]float32, len(bx.Data))
	for i := range g.N {
		for j := i * g.R * 4; j < (i+1)*g.R*4; j++ {
			g.Boxes[j] = bx.Data[j] / s.Sizes[i][j%2]
		}
	}
	if err := checkFinite(g.Feat); err != nil {
		return nil, fmt.Errorf("read %s_ims.npy: %w", base, err)
	}
	return s, g.Validate()
}

func checkFinite(v []float32) error {
	for i, x := range v {
		if x != x || x > 3.4e38 || x < -3.4e38 {
			return fmt.Errorf("element %d is %v", i, x)
		}
	}
	return nil
}
