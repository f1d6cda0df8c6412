package detect

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	_ "image/jpeg"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The cross-check runs the same graph with TensorFlow.js (@tensorflow/tfjs,
// pure-JavaScript CPU backend) through tools/centernet_tfjs.js and compares
// its tensors with the Go network's. scripts/test installs the npm package
// into $XMR_TFJS_MODULES (default: DefaultCacheDir()/tfjs) and Debian's
// darknet test photos into $XMR_DARKNET_DATA.

// refOutputs are the graph nodes the reference run returns.
func refOutputs() []string {
	outs := []string{nodeKeypoints, nodeWH, "tower_0/detections"}
	for _, m := range Maps {
		outs = append(outs, m.Node)
	}
	return outs
}

func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

func tfjsModules(t testing.TB) (node, modules string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node is not installed: %v", err)
	}
	modules = os.Getenv("XMR_TFJS_MODULES")
	if modules == "" {
		modules = filepath.Join(DefaultCacheDir(), "tfjs")
	}
	if _, err := os.Stat(filepath.Join(modules, "node_modules", "@tensorflow", "tfjs", "package.json")); err != nil {
		skipOrFail(t, "@tensorflow/tfjs is not installed in %s (npm install --prefix %s @tensorflow/tfjs@4.22.0): %v", modules, modules, err)
	}
	return node, modules
}

// darknetDirs are where darknet's photos are looked for: $XMR_DARKNET_DATA,
// the installed package's folder, and where scripts/test unpacks it.
func darknetDirs() []string {
	return []string{os.Getenv("XMR_DARKNET_DATA"), "/usr/share/darknet/data",
		filepath.Join(DefaultCacheDir(), "darknet", "usr", "share", "darknet", "data")}
}

// darknetPhoto returns the path of one of Debian's darknet test photos.
func darknetPhoto(t testing.TB, name string) string {
	t.Helper()
	dirs := darknetDirs()
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	skipOrFail(t, "%s not found in %q (Debian package darknet; scripts/test unpacks it)", name, darknetDirs())
	return ""
}

func loadPhoto(t testing.TB, path string) []float32 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, _, err := image.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return Prepare(img)
}

// syntheticImage is a smooth pattern with noise: not a photo, but it drives
// every channel of the network away from zero.
func syntheticImage() []float32 {
	x := randomImage(7)
	for y := 0; y < InputSize; y++ {
		for xx := 0; xx < InputSize; xx++ {
			p := (y*InputSize + xx) * 3
			x[p] = 0.7*float32(128+100*math.Sin(float64(xx)/23)) + 0.3*x[p]
			x[p+1] = 0.7*float32(128+100*math.Cos(float64(y)/31)) + 0.3*x[p+1]
			x[p+2] = 0.7*float32((xx+y)%256) + 0.3*x[p+2]
		}
	}
	return x
}

// runTFJS runs the reference on the inputs and returns, per input, each
// requested node's tensor.
func runTFJS(t testing.TB, inputs [][]float32, outputs []string) []map[string][]float32 {
	t.Helper()
	node, modules := tfjsModules(t)
	dir := testWeights(t)
	tmp := t.TempDir()
	var files string
	for i, in := range inputs {
		p := filepath.Join(tmp, fmt.Sprintf("in%d.f32", i))
		b := make([]byte, 4*len(in))
		for j, v := range in {
			binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(v))
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			files += ","
		}
		files += p
	}
	outs := ""
	for i, o := range outputs {
		if i > 0 {
			outs += ","
		}
		outs += o
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "../tools/centernet_tfjs.js", "--modules", modules, "--model", dir, "--input", files, "--outputs", outs, "--out", tmp)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tfjs reference: %v\n%s", err, b)
	}
	var meta struct {
		Backend string
		Inputs  []struct {
			Outputs []struct {
				Name  string
				Shape []int
				File  string
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(tmp, "outputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Backend != "cpu" || len(meta.Inputs) != len(inputs) {
		t.Fatalf("reference ran on backend %q with %d inputs", meta.Backend, len(meta.Inputs))
	}
	res := make([]map[string][]float32, len(inputs))
	for i, in := range meta.Inputs {
		res[i] = make(map[string][]float32)
		for _, o := range in.Outputs {
			raw, err := os.ReadFile(filepath.Join(tmp, o.File))
			if err != nil {
				t.Fatal(err)
			}
			v := make([]float32, len(raw)/4)
			for j := range v {
				v[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
			}
			res[i][o.Name] = v
		}
	}
	return res
}

// relErr returns max|a-b| / max|b|.
func relErr(a, b []float32) float64 {
	var d, m float64
	for i := range b {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
		m = max(m, math.Abs(float64(b[i])))
	}
	if m == 0 {
		return d
	}
	return d / m
}

// refDetections reads the graph's own decoding, [1 100 6] rows of x1 y1 x2
// y2 score class, keeping rows scoring at least minScore.
func refDetections(v []float32, minScore float32) []Detection {
	var out []Detection
	for i := 0; i+6 <= len(v); i += 6 {
		if v[i+4] < minScore {
			continue
		}
		out = append(out, Detection{Box: [4]float32{v[i], v[i+1], v[i+2], v[i+3]}, Score: v[i+4], Class: int(v[i+5])})
	}
	return out
}

var (
	refOnce   sync.Once
	refImages [][]float32
	refNames  []string
	refRes    []map[string][]float32
)

// photos are Debian's darknet test photos with the objects the detector
// must find in each (score >= 0.3): any of the classes in each group.
var photos = []struct {
	name    string
	objects map[string][]int
}{
	{"dog.jpg", map[string][]int{"dog": {16}, "bicycle": {1}, "vehicle": {2, 5, 7}}},
	{"horses.jpg", map[string][]int{"horse": {17}}},
	{"person.jpg", map[string][]int{"person": {0}, "dog": {16}}},
	{"giraffe.jpg", map[string][]int{"giraffe": {23}, "zebra": {22}}},
	{"eagle.jpg", map[string][]int{"bird": {14}}},
	{"kite.jpg", map[string][]int{"kite": {33}, "person": {0}}},
}

// photoDir returns the folder of darknet's photos, or "".
func photoDir() string {
	for _, dir := range darknetDirs() {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "dog.jpg")); err == nil {
			return dir
		}
	}
	return ""
}

// refPhotos are the photos the reference runs on: dog.jpg and kite.jpg (many
// small objects), or all of them when XMR_TFJS_ALL=1 (TF.js's CPU backend
// takes several seconds an image, too long to run all in the suite).
func refPhotos() []string {
	if os.Getenv("XMR_TFJS_ALL") == "1" {
		var all []string
		for _, ph := range photos {
			all = append(all, ph.name)
		}
		return all
	}
	return []string{"dog.jpg", "kite.jpg"}
}

// reference runs the tfjs reference once on the darknet photos, or on a
// synthetic image when the photos are not installed (or XMR_TFJS_ALL=1).
func reference(t *testing.T) ([]string, [][]float32, []map[string][]float32) {
	t.Helper()
	tfjsModules(t)
	testWeights(t)
	refOnce.Do(func() {
		dir := photoDir()
		if dir == "" || os.Getenv("XMR_TFJS_ALL") == "1" {
			refNames = []string{"synthetic"}
			refImages = [][]float32{syntheticImage()}
		}
		if dir != "" {
			for _, name := range refPhotos() {
				refNames = append(refNames, name)
				refImages = append(refImages, loadPhoto(t, filepath.Join(dir, name)))
			}
		}
		refRes = runTFJS(t, refImages, refOutputs())
	})
	if refRes == nil {
		t.Fatal("the reference run failed")
	}
	return refNames, refImages, refRes
}

// maxTFJSRelErr bounds the relative error max|go-tfjs|/max|tfjs| of
// every tensor TestMatchesTFJS compares (the class heatmap, the box sizes
// and the four feature maps): 4x the largest measured, 4.9e-6 (a
// synthetic image and darknet's six photos, docs/extract.md), room for
// float32 sums taken in another order and no more; a wrong weight, padding
// or activation is off by orders of magnitude more.
const maxTFJSRelErr = 2e-5

func TestMatchesTFJS(t *testing.T) {
	d := testDetector(t)
	names, images, refs := reference(t)
	for i, img := range images {
		got, err := d.g.run(context.Background(), img, func(string) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		for _, node := range append([]string{nodeKeypoints, nodeWH}, mapNodes()...) {
			ref := refs[i][node]
			if len(ref) != len(got[node]) {
				t.Fatalf("%s %s: %d values, reference %d", names[i], node, len(got[node]), len(ref))
			}
			e := relErr(got[node], ref)
			t.Logf("%s %-40s max|go-tfjs|/max|tfjs| = %.2e", names[i], node, e)
			if e >= maxTFJSRelErr {
				t.Errorf("%s %s: relative error %.2e, want < %.0e", names[i], node, e, maxTFJSRelErr)
			}
		}
		// Decoding: every reference detection scoring 0.05 or more is found
		// with the same class, score and box.
		mine := decode(got[nodeKeypoints], got[nodeWH], 100, 0.04)
		ref := refDetections(refs[i]["tower_0/detections"], 0.05)
		if len(ref) == 0 && names[i] != "synthetic" {
			t.Errorf("%s: the reference detects nothing", names[i])
		}
		for _, r := range ref {
			best := -1
			for j, m := range mine {
				if m.Class == r.Class && (best < 0 || boxDist(m.Box, r.Box) < boxDist(mine[best].Box, r.Box)) {
					best = j
				}
			}
			if best < 0 {
				t.Errorf("%s: reference detection %+v not found", names[i], r)
				continue
			}
			m := mine[best]
			if boxDist(m.Box, r.Box) > 1e-3*InputSize || math.Abs(float64(m.Score-r.Score)) > 1e-3 {
				t.Errorf("%s: detection %+v, reference %+v", names[i], m, r)
			}
		}
		t.Logf("%s: %d reference detections >= 0.05 matched", names[i], len(ref))
	}
}

func mapNodes() []string {
	var n []string
	for _, m := range Maps {
		n = append(n, m.Node)
	}
	return n
}

func boxDist(a, b [4]float32) float64 {
	var d float64
	for k := range a {
		d = max(d, math.Abs(float64(a[k]-b[k])))
	}
	return d
}

// TestPhotos: in each of darknet's photos the detector finds the objects
// listed in photos (dog.jpg: the dog, the bicycle and the vehicle). In the
// photos the reference ran on, each listed object is found with IoU >= 0.5
// against the reference runtime's box for it, and every object the
// reference finds (score >= 0.3, after NMS) is found with the same class
// and IoU >= 0.5.
func TestPhotos(t *testing.T) {
	dir := darknetPhoto(t, "dog.jpg")
	dir = filepath.Dir(dir)
	d := testDetector(t)
	var names []string
	var refs []map[string][]float32
	if _, err := exec.LookPath("node"); err == nil || os.Getenv("CI") == "true" {
		names, _, refs = reference(t)
	}
	for _, ph := range photos {
		img := loadPhoto(t, filepath.Join(dir, ph.name))
		out, err := d.Run(context.Background(), img, RunOptions{MinScore: 0.3, IoU: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		for _, det := range out.Detections {
			t.Logf("%s go: %-13s %.3f %v", ph.name, ClassName(det.Class), det.Score, det.Box)
		}
		found := func(classes []int, box *[4]float32) bool {
			for _, det := range out.Detections {
				if contains(classes, det.Class) && (box == nil || IoU(det.Box, *box) >= 0.5) {
					return true
				}
			}
			return false
		}
		for obj, classes := range ph.objects {
			if !found(classes, nil) {
				t.Errorf("%s: no %s detected", ph.name, obj)
			}
		}
		k := -1
		for i, n := range names {
			if n == ph.name {
				k = i
			}
		}
		if k < 0 {
			continue
		}
		ref := nms(refDetections(refs[k]["tower_0/detections"], 0.3), 0.5, 100)
		for _, r := range ref {
			if !found([]int{r.Class}, &r.Box) {
				t.Errorf("%s: the reference's %s %.3f %v is not found", ph.name, ClassName(r.Class), r.Score, r.Box)
			}
		}
		for obj, classes := range ph.objects {
			var rbox *Detection
			for i, r := range ref {
				if contains(classes, r.Class) {
					rbox = &ref[i]
					break
				}
			}
			if rbox == nil {
				t.Errorf("%s: the reference does not find the %s", ph.name, obj)
				continue
			}
			if !found(classes, &rbox.Box) {
				t.Errorf("%s: no %s detected with IoU >= 0.5 against the reference's %v", ph.name, obj, rbox.Box)
			}
		}
		t.Logf("%s: %d reference objects matched with IoU >= 0.5", ph.name, len(ref))
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
