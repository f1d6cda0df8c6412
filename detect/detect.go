// Package detect runs a pretrained general-object detector on images:
// CenterNet with a MobileNetV3-Large x0.75 backbone trained on COCO
// (80 classes), as shipped in the npm package @vladmandic/human 3.3.6 as a
// TensorFlow.js graph model (models/centernet.json and centernet.bin, MIT
// licence). It returns detections (boxes, classes, scores) and the network's
// feature maps, which callers pool into region features.
//
// The network is executed in Go from the graph in centernet.json (see
// package tfjs), each node bound to its weights by name with every shape
// checked at Load; convolutions go through package blas. Its tensors are
// checked against TensorFlow.js running the same graph (TestMatchesTFJS):
// a relative error max|go-tfjs|/max|tfjs| under 2e-5 on the class heatmap,
// the box sizes and the four feature maps (4.9e-6 measured).
package detect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/xmr-project/xmr/tfjs"
)

// Name identifies the feature extractor this package implements. Data sets and
// checkpoints record it so that features of different extractors are not mixed.
const Name = "centernet-mobilenetv3-coco"

// Version identifies the weights: the npm package they come from.
const Version = "human-3.3.6"

// InputSize is the side of the square RGB image the network takes.
const InputSize = 512

// Model files inside the weights directory.
const (
	ModelFile   = "centernet.json"
	WeightsFile = "centernet.bin"
)

// Graph nodes the detector reads.
const (
	nodeInput     = "tower_0/images"
	nodeKeypoints = "tower_0/keypoints" // [1 128 128 80] class heatmap after sigmoid
	nodeWH        = "tower_0/wh"        // [1 128 128 4] distances to the box's sides, input pixels
)

// heatmap geometry: the heads are at stride 4.
const (
	gridSize   = InputSize / 4
	gridStride = 4
)

// MapSpec describes one feature map Run can return.
type MapSpec struct {
	Name   string // short name used in Output.Maps
	Node   string // graph node it is read from
	Stride int    // input pixels per cell
	C      int    // channels
	// Optional marks a map that Run returns only when RunOptions.Maps
	// names it (ClassMap), not by default.
	Optional bool
}

// Maps lists the feature maps Run returns, finest first: the neck's output
// at stride 4 after its squeeze-and-excite (what the detection heads read),
// the neck's merged maps at strides 8 and 16, and the backbone's last map
// at stride 32.
var Maps = []MapSpec{
	{Name: "neck_s4", Node: "tower_0/CenternetHead/mul", Stride: 4, C: 128},
	{Name: "neck_s8", Node: "tower_0/CenternetHead/Relu_1", Stride: 8, C: 192},
	{Name: "neck_s16", Node: "tower_0/CenternetHead/Relu", Stride: 16, C: 256},
	{Name: "backbone_s32", Node: "tower_0/extern1/hard_swish/mul_1", Stride: 32, C: 480},
}

// ClassMap is the class heatmap as a feature map: the 80 class scores
// (after the sigmoid, 0..1) at stride 4, from which detections are
// decoded. Pooled over a region it says which COCO objects the region
// holds, and how surely. Run returns it after the maps of Maps, and only
// when RunOptions.Maps names it.
var ClassMap = MapSpec{Name: "classes", Node: nodeKeypoints, Stride: gridStride, C: NumClasses, Optional: true}

// MapNamed returns the map of Maps, or ClassMap, with the given name.
func MapNamed(name string) (MapSpec, bool) {
	if i := slices.IndexFunc(Maps, func(s MapSpec) bool { return s.Name == name }); i >= 0 {
		return Maps[i], true
	}
	if name == ClassMap.Name {
		return ClassMap, true
	}
	return MapSpec{}, false
}

// allMaps returns every map Run can return: Maps, then ClassMap.
func allMaps() []MapSpec { return append(slices.Clone(Maps), ClassMap) }

// Detection is one detected object.
type Detection struct {
	Box   [4]float32 // x1, y1, x2, y2 in input pixels, clipped to 0..InputSize
	Class int        // COCO class, 0..79 (see ClassName)
	Score float32    // confidence, 0..1
}

// FeatureMap is one NHWC feature map of the network for a single image.
type FeatureMap struct {
	Name    string
	H, W, C int
	Stride  int       // input pixels per map cell
	Data    []float32 // H*W*C, row-major HWC
}

// Output is the result of running the detector on one image.
type Output struct {
	Detections []Detection  // best first
	Maps       []FeatureMap // as listed in Maps (or selected by RunOptions.Maps), finest first
	// Taps are the activations of the nodes named by WithTaps, in order,
	// each with Name the node's name.
	Taps []FeatureMap
	// Untuned are, for a detector with a fine-tuned part (Tuned) asked
	// with RunOptions.KeepUntuned, the maps of Maps that the part
	// replaced, as the detector itself computed them (copies).
	Untuned []FeatureMap

	g *graph // the maps' memory returns to it on Release
}

// Release hands the memory of the maps back to the detector, whose next
// runs reuse it instead of allocating (megabytes an image); the maps must
// not be used after it. Calling it is optional: without it the memory is
// garbage-collected.
func (o *Output) Release() {
	if o == nil || o.g == nil {
		return
	}
	for i := range o.Maps {
		o.g.recycle(o.Maps[i].Data)
		o.Maps[i].Data = nil
	}
	for i := range o.Taps {
		o.g.recycle(o.Taps[i].Data)
		o.Taps[i].Data = nil
	}
	o.g = nil
}

// RunOptions controls detection decoding.
type RunOptions struct {
	MaxDetections int      // at most this many detections after NMS (of the 100 best peaks); 0 means 100
	MinScore      float32  // drop detections scoring below this
	IoU           float32  // NMS: drop a box overlapping a better one by more than this IoU; 0 means 0.5
	Maps          []string // names of the maps to return (Maps and ClassMap); nil returns those of Maps
	// KeepUntuned asks a detector with a fine-tuned part (Tuned) for the
	// maps its part replaced as the detector computed them too
	// (Output.Untuned); the detector itself has none to give.
	KeepUntuned bool
}

// Detector is a loaded network. Its methods are safe for concurrent use
// by several goroutines: the weights are only read, and each call of Run
// or Heatmap works in buffers of its own.
type Detector struct {
	g    *graph
	m    *tfjs.Model // the graph, for Net and WithTaps
	taps []string    // extra nodes Run returns (WithTaps)
}

// Load reads centernet.json and centernet.bin from dir and binds the network.
func Load(dir string) (*Detector, error) {
	path := filepath.Join(dir, ModelFile)
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("detect: %s is missing; %s", path, fetchHint(dir))
		}
		return nil, fmt.Errorf("detect: %w", err)
	}
	if err := Verify(dir); err != nil {
		return nil, fmt.Errorf("detect: %w; remove it and fetch again, or %s", err, fetchHint(dir))
	}
	m, err := tfjs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("detect: %w", err)
	}
	return newDetector(m, path)
}

func newDetector(m *tfjs.Model, path string, taps ...string) (*Detector, error) {
	outputs := []string{nodeKeypoints, nodeWH}
	for _, s := range Maps {
		outputs = append(outputs, s.Node)
	}
	outputs = append(outputs, taps...)
	if name := placeholderName(m); name != nodeInput {
		return nil, fmt.Errorf("detect: %s: the graph's input is %q, want %q: not the CenterNet model", path, name, nodeInput)
	}
	g, err := compile(m, shape{1, InputSize, InputSize, 3}, outputs)
	if err != nil {
		return nil, fmt.Errorf("detect: %s: %w", path, err)
	}
	check := func(node string, want shape) error {
		got := g.shapes[g.outputs[node]]
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("detect: %s: node %q has shape %v, want %v", path, node, got, want)
		}
		return nil
	}
	if err := check(nodeKeypoints, shape{1, gridSize, gridSize, NumClasses}); err != nil {
		return nil, err
	}
	if err := check(nodeWH, shape{1, gridSize, gridSize, 4}); err != nil {
		return nil, err
	}
	for _, s := range Maps {
		if err := check(s.Node, shape{1, InputSize / s.Stride, InputSize / s.Stride, s.C}); err != nil {
			return nil, err
		}
	}
	for _, t := range taps {
		if s := g.shapes[g.outputs[t]]; len(s) != 4 || s[1] < 1 || InputSize%s[1] != 0 || s[1] != s[2] {
			return nil, fmt.Errorf("detect: %s: node %q has shape %v; a tap must be a square NHWC map", path, t, s)
		}
	}
	return &Detector{g: g, m: m, taps: slices.Clone(taps)}, nil
}

// WithTaps returns a detector that also returns the activations of the
// named graph nodes (Output.Taps, in this order), for example the input
// of a Net to cache once per image. It shares the weights; the network is
// compiled anew, so call it once, not per image.
func (d *Detector) WithTaps(nodes ...string) (*Detector, error) {
	for _, n := range nodes {
		if !slices.ContainsFunc(d.m.Nodes, func(g tfjs.Node) bool { return g.Name == n }) {
			return nil, fmt.Errorf("detect: no graph node named %q", n)
		}
	}
	return newDetector(d.m, "the loaded model", append(slices.Clone(d.taps), nodes...)...)
}

// MapInfo describes the feature maps Run can return, in order, without
// running the network: their names, channels and strides; those marked
// Optional (ClassMap) only when RunOptions.Maps names them. The slice is
// the caller's.
func (d *Detector) MapInfo() []MapSpec { return allMaps() }

// MapWidths returns the channel count of each map in Maps, in order.
func (d *Detector) MapWidths() []int {
	w := make([]int, len(Maps))
	for i, s := range Maps {
		w[i] = s.C
	}
	return w
}

// Run detects objects in one image: rgb holds InputSize*InputSize*3 values in
// HWC order, each 0..255. Detections are decoded from the heatmap's local
// maxima (3x3), best MaxDetections kept after class-agnostic NMS.
func (d *Detector) Run(ctx context.Context, rgb []float32, opt RunOptions) (*Output, error) {
	if len(rgb) != InputSize*InputSize*3 {
		return nil, fmt.Errorf("detect: image has %d values, want %d (%dx%d RGB)", len(rgb), InputSize*InputSize*3, InputSize, InputSize)
	}
	wantMap := make(map[string]bool)
	for _, s := range Maps {
		wantMap[s.Node] = opt.Maps == nil
	}
	classes := false
	for _, name := range opt.Maps {
		s, ok := MapNamed(name)
		if !ok {
			return nil, fmt.Errorf("detect: no feature map named %q", name)
		}
		if s == ClassMap {
			classes = true
		} else {
			wantMap[s.Node] = true
		}
	}
	vals, err := d.g.run(ctx, rgb, func(n string) bool {
		return n == nodeKeypoints || n == nodeWH || wantMap[n] || slices.Contains(d.taps, n)
	})
	if err != nil {
		return nil, fmt.Errorf("detect: %w", err)
	}
	maxDet := opt.MaxDetections
	if maxDet <= 0 {
		maxDet = 100
	}
	iou := opt.IoU
	if iou <= 0 {
		iou = 0.5
	}
	cands := decode(vals[nodeKeypoints], vals[nodeWH], 100, opt.MinScore)
	for i := range cands {
		for k := range cands[i].Box {
			cands[i].Box[k] = min(max(cands[i].Box[k], 0), InputSize)
		}
	}
	d.g.recycle(vals[nodeWH]) // decoded: no longer needed
	out := &Output{Detections: nms(cands, iou, maxDet), g: d.g}
	for _, s := range Maps {
		if data, ok := vals[s.Node]; ok && wantMap[s.Node] {
			n := InputSize / s.Stride
			out.Maps = append(out.Maps, FeatureMap{Name: s.Name, H: n, W: n, C: s.C, Stride: s.Stride, Data: data})
		}
	}
	if classes {
		s := ClassMap
		out.Maps = append(out.Maps, FeatureMap{Name: s.Name, H: gridSize, W: gridSize, C: s.C, Stride: s.Stride, Data: vals[nodeKeypoints]})
	} else {
		d.g.recycle(vals[nodeKeypoints])
	}
	for _, t := range d.taps {
		s := d.g.shapes[d.g.outputs[t]]
		data, ok := vals[t]
		if !ok {
			return nil, fmt.Errorf("detect: tap %q was not computed", t)
		}
		if wantMap[t] { // also a map: the two must not share a buffer
			data = slices.Clone(data)
		}
		out.Taps = append(out.Taps, FeatureMap{Name: t, H: s[1], W: s[2], C: s[3], Stride: InputSize / s[1], Data: data})
	}
	return out, nil
}

// Heatmap returns the class heatmap for one image: gridSize x gridSize x
// NumClasses values (HWC) after the sigmoid, the scores detections are
// decoded from. Benchmarks use it to check a peer computes the same network.
func (d *Detector) Heatmap(ctx context.Context, rgb []float32) ([]float32, error) {
	if len(rgb) != InputSize*InputSize*3 {
		return nil, fmt.Errorf("detect: image has %d values, want %d", len(rgb), InputSize*InputSize*3)
	}
	vals, err := d.g.run(ctx, rgb, func(n string) bool { return n == nodeKeypoints })
	if err != nil {
		return nil, fmt.Errorf("detect: %w", err)
	}
	return vals[nodeKeypoints], nil
}
