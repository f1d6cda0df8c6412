package synth

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadWhatWriteWrote reads back world.json and every split's scenes.
func TestReadWhatWriteWrote(t *testing.T) {
	dir := t.TempDir()
	if _, err := Generate(context.Background(), dir, Config{N: 120, Seed: 4, Dim: 8, Regions: 8, NoImages: true}); err != nil {
		t.Fatal(err)
	}
	m, err := LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Splits {
		path := filepath.Join(dir, s.Name+"_scenes.jsonl")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := ReadScenes(bytes.NewReader(b), path)
		if err != nil || len(recs) != s.Len {
			t.Fatalf("%s: %d scenes, %v; want %d", path, len(recs), err, s.Len)
		}
	}
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Generate(context.Background(), dir, Config{N: 100, Seed: 1, Dim: 8, Regions: 8, NoImages: true}); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(filepath.Join(dir, "world.json"))
	manifests := []struct{ edit, want string }{
		{`"format": "xmr-synth"|"format": "other"`, `format "other"`},
		{`"version": 1|"version": 2`, "version 2"},
		{`"images": 100|"images": 0`, "all must be positive"},
		{`"images": 100|"images": 101`, "the splits hold 100 images, the world 101"},
		{`"name": "dev"|"name": "val"`, `unknown split "val"`},
		{`"images": 20|"images": -20`, "outside the world"},
		{"APPEND|{}", "data after the JSON object"},
	}
	for _, c := range manifests {
		from, to, _ := strings.Cut(c.edit, "|")
		b := strings.Replace(string(good), from, to, 1)
		if from == "APPEND" {
			b = string(good) + to
		}
		if b == string(good) {
			t.Fatalf("edit %q changed nothing", c.edit)
		}
		if _, err := ReadManifest(strings.NewReader(b), "w.json"); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "w.json") {
			t.Errorf("%s: %v, want %q", c.edit, err, c.want)
		}
	}
	if _, err := LoadManifest(t.TempDir()); err == nil {
		t.Error("LoadManifest of an empty directory succeeded")
	}
	scenes := []struct{ in, want string }{
		{`{"image":1,"id":"a","width":10,"height":10}`, "image 1, expected 0"},
		{`{"image":0,"width":10,"height":10}`, "no id"},
		{`{"image":0,"id":"a","width":0,"height":10}`, "image size 0 x 10"},
		{`{"image":0,"id":"a","width":10,"height":10,"nregions":2,"objects":[{"box":[0,0,11,5]}]}`, "box [0 0 11 5] outside"},
		{`{"image":0,"id":"a","width":10,"height":10,"nregions":2,"objects":[{"box":[0,0,1,1],"region":2}]}`, "region 2 of 2"},
		{`{"image":0`, "line 1"},
	}
	for _, c := range scenes {
		if _, err := ReadScenes(strings.NewReader(c.in), "s.jsonl"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
		}
	}
}

// FuzzReadManifest: any bytes fail cleanly or give a world whose splits
// lie within it.
func FuzzReadManifest(f *testing.F) {
	w, _ := New(Config{N: 100, Seed: 1, Dim: 8, Regions: 8})
	var buf bytes.Buffer
	b, _ := json.MarshalIndent(w.Manifest(), "", "  ")
	buf.Write(b)
	f.Add(buf.Bytes())
	f.Add([]byte(`{"format":"xmr-synth","version":1,"images":2,"dim":1,"regions":1,"captions_per_image":5,"image_width":1,"image_height":1,"splits":[{"name":"train","start":0,"len":2}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadManifest(bytes.NewReader(b), "w.json")
		if err != nil {
			return
		}
		for _, s := range m.Splits {
			if s.Start < 0 || s.Len < 0 || s.Start+s.Len > m.Images {
				t.Fatalf("split %+v outside %d images", s, m.Images)
			}
		}
	})
}

// FuzzReadScenes: any bytes fail cleanly or give records in order with
// boxes inside their images.
func FuzzReadScenes(f *testing.F) {
	f.Add([]byte(`{"image":0,"id":"0","family":"f","variant":0,"width":160,"height":120,"background":"grey","nregions":36,"objects":[{"category":"circle","colour":"red","size":"large","x":80,"y":60,"radius":20,"angle":0,"cell":"middle","box":[60,40,100,80],"region":0}]}` + "\n" + `{"image":1,"id":"1","width":160,"height":120,"nregions":0,"objects":[]}`))
	f.Add([]byte("{}\n"))
	f.Add([]byte(`{"image":0,"id":"a","width":1,"height":1,"objects":[{"box":[0,0,1,1],"region":-1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := ReadScenes(bytes.NewReader(b), "s.jsonl")
		if err != nil {
			return
		}
		for i, r := range recs {
			if r.Image != i {
				t.Fatalf("record %d has image %d", i, r.Image)
			}
			for _, o := range r.Objects {
				if o.Box[2] > r.Width || o.Box[3] > r.Height || o.Box[0] < 0 || o.Box[1] < 0 {
					t.Fatalf("box %v outside %d x %d", o.Box, r.Width, r.Height)
				}
			}
		}
	})
}
