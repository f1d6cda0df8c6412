package synth

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/internal/infile"
)

// LoadManifest reads and checks dir/world.json; its absence means that no
// complete world is in dir (Write writes it last). A dir holding
// data.IncompleteMarker (a Write stopped while renaming its files into
// place) is refused.
func LoadManifest(dir string) (*Manifest, error) {
	if _, err := os.Stat(filepath.Join(dir, data.IncompleteMarker)); err == nil {
		return nil, fmt.Errorf("read world: %s is half replaced: xmr synth was stopped while renaming its files into place (%s is there); run it again", dir, data.IncompleteMarker)
	}
	path := filepath.Join(dir, "world.json")
	f, err := infile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read world: %w", err)
	}
	defer f.Close()
	return ReadManifest(f, path)
}

// ReadManifest parses a world.json from r (name names it in errors) and
// checks what readers rely on: the format and version, positive sizes, and
// splits that are known, within the world and, but for prefixes, cover it
// exactly. Unknown fields are allowed (later versions may add some).
func ReadManifest(r io.Reader, name string) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(r)
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: data after the JSON object", name)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("read %s: %s", name, fmt.Sprintf(format, args...))
	}
	switch {
	case m.Format != "xmr-synth":
		return nil, bad("format %q, want \"xmr-synth\"", m.Format)
	case m.Version != 1:
		return nil, bad("version %d, this xmr reads version 1", m.Version)
	case m.Images <= 0 || m.Dim <= 0 || m.Regions <= 0 || m.CaptionsPerImage <= 0:
		return nil, bad("images %d, dim %d, regions %d, captions_per_image %d: all must be positive", m.Images, m.Dim, m.Regions, m.CaptionsPerImage)
	case m.ImageWidth <= 0 || m.ImageHeight <= 0:
		return nil, bad("image size %d x %d", m.ImageWidth, m.ImageHeight)
	}
	covered := 0
	for i, s := range m.Splits {
		if !slices.Contains(splitNames, s.Name) {
			return nil, bad("splits[%d]: unknown split %q (want %v)", i, s.Name, splitNames)
		}
		if s.Start < 0 || s.Len < 0 || s.Start > m.Images-s.Len {
			return nil, bad("splits[%d] (%s): images [%d, %d+%d) outside the world's %d", i, s.Name, s.Start, s.Start, s.Len, m.Images)
		}
		if s.Of == "" {
			covered += s.Len
		} else if !slices.ContainsFunc(m.Splits, func(p Split) bool { return p.Name == s.Of && p.Of == "" && s.Len <= p.Len }) {
			return nil, bad("splits[%d] (%s): prefix of %q, which is not a larger split of the world", i, s.Name, s.Of)
		}
	}
	if covered != m.Images {
		return nil, bad("the splits hold %d images, the world %d", covered, m.Images)
	}
	return &m, nil
}

// ReadScenes parses {split}_scenes.jsonl from r, one record per image in
// order (name names it in errors), checking each record's image number,
// size, region count and object boxes.
func ReadScenes(r io.Reader, name string) ([]SceneRecord, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<12), 1<<20)
	var out []SceneRecord
	for line := 1; sc.Scan(); line++ {
		var rec SceneRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("read %s: line %d: %w", name, line, err)
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("read %s: line %d: %s", name, line, fmt.Sprintf(format, args...))
		}
		switch {
		case rec.Image != len(out):
			return nil, bad("image %d, expected %d (one record per image, in order)", rec.Image, len(out))
		case rec.ID == "":
			return nil, bad("no id")
		case rec.Width <= 0 || rec.Height <= 0:
			return nil, bad("image size %d x %d", rec.Width, rec.Height)
		case rec.NRegions < 0:
			return nil, bad("nregions %d", rec.NRegions)
		}
		for k, o := range rec.Objects {
			b := o.Box
			if b[0] < 0 || b[1] < 0 || b[0] > b[2] || b[1] > b[3] || b[2] > rec.Width || b[3] > rec.Height {
				return nil, bad("objects[%d]: box %v outside the %d x %d image", k, b, rec.Width, rec.Height)
			}
			if o.Region < -1 || o.Region >= max(rec.NRegions, 1) {
				return nil, bad("objects[%d]: region %d of %d", k, o.Region, rec.NRegions)
			}
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return out, nil
}
