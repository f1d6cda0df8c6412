// Package tfjs reads TensorFlow.js graph models: a model.json file holding the
// graph (modelTopology: nodes with their op, inputs and attributes) and a
// weights manifest naming the binary shard files that hold every constant
// tensor. Weights stored as float32, int32 or bool are read as such; weights
// quantized to float16, uint8 or uint16 are expanded to float32.
//
// Every tensor's shape and byte count is checked against the manifest and
// the shards' sizes before anything is allocated for it, and errors name the
// file and the field at fault.
package tfjs

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/xmr-project/xmr/internal/half"
	"github.com/xmr-project/xmr/internal/infile"
)

// Limits on what Read accepts; a file that exceeds them is refused before
// any allocation.
const (
	MaxModelJSON   = 64 << 20 // bytes of model.json
	MaxWeightBytes = 2 << 30  // bytes of all weight shards together
	MaxRank        = 8        // dimensions of one tensor
	MaxNodes       = 1 << 20  // nodes in the graph
)

// Model is a parsed TF.js graph model.
type Model struct {
	Format      string // "graph-model"
	GeneratedBy string
	ConvertedBy string
	Nodes       []Node             // in file order
	Inputs      []string           // signature input names (sorted), if the file has a signature
	Outputs     []string           // signature output names (sorted), if the file has a signature
	Weights     map[string]*Tensor // by name
}

// Node is one operation of the graph.
type Node struct {
	Name   string
	Op     string
	Inputs []string // "name", "name:k" for output k, or "^name" for a control input
	Attr   map[string]Attr
}

// Attr is a node attribute. Only the field matching the attribute's kind is set.
type Attr struct {
	S     []byte
	I     int64
	F     float64
	B     bool
	Type  string  // a DataType such as "DT_FLOAT"
	Shape []int64 // for shape attributes; -1 for an unknown dimension
	List  *AttrList
	Kind  string // which field is set: "s", "i", "f", "b", "type", "shape", "list" or "" when unknown
}

// AttrList is the value of a list attribute.
type AttrList struct {
	S    [][]byte
	I    []int64
	F    []float64
	B    []bool
	Type []string
}

// Tensor is one weight tensor.
type Tensor struct {
	Name  string
	Shape []int
	DType string    // "float32", "int32" or "bool" after dequantization
	F32   []float32 // DType float32
	I32   []int32   // DType int32
	Bool  []bool    // DType bool
}

// Len returns the number of elements the shape holds.
func (t *Tensor) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Open reads a graph model from the model.json file at path, with its weight
// shards looked up relative to the file's directory.
func Open(modelPath string) (*Model, error) {
	f, err := infile.Open(modelPath)
	if err != nil {
		return nil, fmt.Errorf("tfjs: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("tfjs: %w", err)
	}
	if st.Size() > MaxModelJSON {
		return nil, fmt.Errorf("tfjs: %s: %d bytes, more than the %d a model.json may have", modelPath, st.Size(), MaxModelJSON)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxModelJSON+1))
	if err != nil {
		return nil, fmt.Errorf("tfjs: %s: %w", modelPath, err)
	}
	return Read(modelPath, data, infile.DirFS(filepath.Dir(modelPath)))
}

// Read parses model.json content (name is used in errors) and reads the
// weight shards it names from fsys.
func Read(name string, modelJSON []byte, fsys fs.FS) (*Model, error) {
	m, groups, err := parseJSON(name, modelJSON)
	if err != nil {
		return nil, err
	}
	m.Weights = make(map[string]*Tensor)
	for gi, g := range groups {
		if err := readGroup(name, gi, g, fsys, m.Weights); err != nil {
			return nil, err
		}
	}
	for _, n := range m.Nodes {
		if n.Op == "Const" {
			if _, ok := m.Weights[n.Name]; !ok {
				return nil, fmt.Errorf("tfjs: %s: Const node %q has no tensor in weightsManifest", name, n.Name)
			}
		}
	}
	return m, nil
}

type rawModel struct {
	Format        string          `json:"format"`
	GeneratedBy   string          `json:"generatedBy"`
	ConvertedBy   json.RawMessage `json:"convertedBy"`
	ModelTopology *struct {
		Node []rawNode `json:"node"`
	} `json:"modelTopology"`
	Signature *struct {
		Inputs  map[string]json.RawMessage `json:"inputs"`
		Outputs map[string]json.RawMessage `json:"outputs"`
	} `json:"signature"`
	WeightsManifest []rawGroup `json:"weightsManifest"`
}

type rawNode struct {
	Name  string             `json:"name"`
	Op    string             `json:"op"`
	Input []string           `json:"input"`
	Attr  map[string]rawAttr `json:"attr"`
}

type rawAttr struct {
	S     *[]byte    `json:"s"`
	I     *jsonInt   `json:"i"`
	F     *jsonFloat `json:"f"`
	B     *bool      `json:"b"`
	Type  *string    `json:"type"`
	Shape *rawShape  `json:"shape"`
	List  *rawList   `json:"list"`
}

type rawShape struct {
	Dim []struct {
		Size jsonInt `json:"size"`
	} `json:"dim"`
	UnknownRank bool `json:"unknownRank"`
}

type rawList struct {
	S    [][]byte    `json:"s"`
	I    []jsonInt   `json:"i"`
	F    []jsonFloat `json:"f"`
	B    []bool      `json:"b"`
	Type []string    `json:"type"`
}

type rawGroup struct {
	Paths   []string    `json:"paths"`
	Weights []rawWeight `json:"weights"`
}

type rawWeight struct {
	Name         string          `json:"name"`
	RawShape     json.RawMessage `json:"shape"`
	DType        string          `json:"dtype"`
	Quantization *struct {
		DType string   `json:"dtype"`
		Scale *float64 `json:"scale"`
		Min   *float64 `json:"min"`
	} `json:"quantization"`
}

// jsonInt is an int64 written either as a JSON number or, as protobuf's JSON
// mapping writes 64-bit integers, as a decimal string.
type jsonInt int64

func (v *jsonInt) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if len(s) >= 2 && s[0] == '"' {
		var err error
		if s, err = strconv.Unquote(s); err != nil {
			return err
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not an integer: %.40q", string(b))
	}
	*v = jsonInt(n)
	return nil
}

// jsonFloat is a float written as a JSON number or as one of the strings
// protobuf's JSON mapping uses ("NaN", "Infinity", "-Infinity").
type jsonFloat float64

func (v *jsonFloat) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if len(s) >= 2 && s[0] == '"' {
		var err error
		if s, err = strconv.Unquote(s); err != nil {
			return err
		}
	}
	switch s {
	case "NaN":
		*v = jsonFloat(math.NaN())
		return nil
	case "Infinity":
		*v = jsonFloat(math.Inf(1))
		return nil
	case "-Infinity":
		*v = jsonFloat(math.Inf(-1))
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("not a number: %.40q", string(b))
	}
	*v = jsonFloat(f)
	return nil
}

func parseJSON(name string, data []byte) (*Model, []rawGroup, error) {
	if len(data) > MaxModelJSON {
		return nil, nil, fmt.Errorf("tfjs: %s: %d bytes, more than the %d a model.json may have", name, len(data), MaxModelJSON)
	}
	var raw rawModel
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, nil, fmt.Errorf("tfjs: %s: not a TF.js model.json: %w", name, err)
	}
	if raw.Format != "graph-model" {
		return nil, nil, fmt.Errorf("tfjs: %s: field \"format\" is %q, want \"graph-model\" (layers models are not supported)", name, raw.Format)
	}
	if raw.ModelTopology == nil {
		return nil, nil, fmt.Errorf("tfjs: %s: field \"modelTopology\" is missing", name)
	}
	if len(raw.ModelTopology.Node) > MaxNodes {
		return nil, nil, fmt.Errorf("tfjs: %s: modelTopology.node has %d nodes, more than %d", name, len(raw.ModelTopology.Node), MaxNodes)
	}
	m := &Model{Format: raw.Format, GeneratedBy: raw.GeneratedBy}
	if len(raw.ConvertedBy) > 0 {
		var s string
		if json.Unmarshal(raw.ConvertedBy, &s) == nil {
			m.ConvertedBy = s
		}
	}
	if raw.Signature != nil {
		m.Inputs = sortedKeys(raw.Signature.Inputs)
		m.Outputs = sortedKeys(raw.Signature.Outputs)
	}
	names := make(map[string]bool, len(raw.ModelTopology.Node))
	m.Nodes = make([]Node, len(raw.ModelTopology.Node))
	for i, rn := range raw.ModelTopology.Node {
		field := fmt.Sprintf("modelTopology.node[%d]", i)
		if rn.Name == "" {
			return nil, nil, fmt.Errorf("tfjs: %s: %s has no name", name, field)
		}
		if rn.Op == "" {
			return nil, nil, fmt.Errorf("tfjs: %s: %s (%q) has no op", name, field, rn.Name)
		}
		if names[rn.Name] {
			return nil, nil, fmt.Errorf("tfjs: %s: %s: node name %q appears twice", name, field, rn.Name)
		}
		names[rn.Name] = true
		n := Node{Name: rn.Name, Op: rn.Op, Inputs: rn.Input, Attr: make(map[string]Attr, len(rn.Attr))}
		for k, ra := range rn.Attr {
			n.Attr[k] = convertAttr(ra)
		}
		m.Nodes[i] = n
	}
	for i, n := range m.Nodes {
		for _, in := range n.Inputs {
			src := InputNode(in)
			if !names[src] {
				return nil, nil, fmt.Errorf("tfjs: %s: modelTopology.node[%d] (%q): input %q names no node", name, i, n.Name, in)
			}
		}
	}
	if len(raw.WeightsManifest) == 0 && len(m.Nodes) > 0 {
		for _, n := range m.Nodes {
			if n.Op == "Const" {
				return nil, nil, fmt.Errorf("tfjs: %s: field \"weightsManifest\" is missing or empty", name)
			}
		}
	}
	return m, raw.WeightsManifest, nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// InputNode returns the name of the node an input reference points at:
// "a:1" and "^a" both name node "a".
func InputNode(ref string) string {
	ref = strings.TrimPrefix(ref, "^")
	if i := strings.LastIndexByte(ref, ':'); i >= 0 {
		if _, err := strconv.Atoi(ref[i+1:]); err == nil {
			return ref[:i]
		}
	}
	return ref
}

// InputIndex returns which output of its node an input reference takes: 1
// for "a:1", 0 for "a".
func InputIndex(ref string) int {
	if i := strings.LastIndexByte(ref, ':'); i >= 0 {
		if k, err := strconv.Atoi(ref[i+1:]); err == nil && k >= 0 {
			return k
		}
	}
	return 0
}

func convertAttr(ra rawAttr) Attr {
	var a Attr
	switch {
	case ra.S != nil:
		a.Kind, a.S = "s", *ra.S
	case ra.I != nil:
		a.Kind, a.I = "i", int64(*ra.I)
	case ra.F != nil:
		a.Kind, a.F = "f", float64(*ra.F)
	case ra.B != nil:
		a.Kind, a.B = "b", *ra.B
	case ra.Type != nil:
		a.Kind, a.Type = "type", *ra.Type
	case ra.Shape != nil:
		a.Kind = "shape"
		a.Shape = make([]int64, len(ra.Shape.Dim))
		for i, d := range ra.Shape.Dim {
			a.Shape[i] = int64(d.Size)
		}
	case ra.List != nil:
		a.Kind = "list"
		l := &AttrList{S: ra.List.S, B: ra.List.B, Type: ra.List.Type}
		for _, v := range ra.List.I {
			l.I = append(l.I, int64(v))
		}
		for _, v := range ra.List.F {
			l.F = append(l.F, float64(v))
		}
		a.List = l
	}
	return a
}

// storedSize returns the bytes one element takes in the shard and the dtype
// the tensor has once read.
func storedSize(w *rawWeight) (size int64, dtype string, err error) {
	if w.Quantization != nil {
		if w.DType != "float32" {
			return 0, "", fmt.Errorf("dtype %q is quantized; only float32 weights may be", w.DType)
		}
		switch w.Quantization.DType {
		case "float16":
			return 2, "float32", nil
		case "uint8", "uint16":
			if w.Quantization.Scale == nil || w.Quantization.Min == nil {
				return 0, "", fmt.Errorf("quantization %q needs scale and min", w.Quantization.DType)
			}
			if w.Quantization.DType == "uint8" {
				return 1, "float32", nil
			}
			return 2, "float32", nil
		default:
			return 0, "", fmt.Errorf("quantization.dtype %q is not float16, uint8 or uint16", w.Quantization.DType)
		}
	}
	switch w.DType {
	case "float32", "int32":
		return 4, w.DType, nil
	case "bool":
		return 1, "bool", nil
	default:
		return 0, "", fmt.Errorf("dtype %q is not float32, int32 or bool", w.DType)
	}
}

// readGroup checks every tensor of one manifest group against the sizes of
// its shards, then reads the shards and decodes the tensors into out.
func readGroup(name string, gi int, g rawGroup, fsys fs.FS, out map[string]*Tensor) error {
	field := fmt.Sprintf("weightsManifest[%d]", gi)
	if len(g.Paths) == 0 {
		if len(g.Weights) == 0 {
			return nil
		}
		return fmt.Errorf("tfjs: %s: %s.paths is empty", name, field)
	}
	// Plan: element counts and byte counts from the manifest alone.
	type plan struct {
		w      *rawWeight
		shape  []int
		n      int64
		size   int64
		dtype  string
		offset int64
	}
	plans := make([]plan, len(g.Weights))
	var total int64
	for i := range g.Weights {
		w := &g.Weights[i]
		wf := fmt.Sprintf("%s.weights[%d]", field, i)
		if w.Name == "" {
			return fmt.Errorf("tfjs: %s: %s has no name", name, wf)
		}
		if _, dup := out[w.Name]; dup {
			return fmt.Errorf("tfjs: %s: %s: weight %q appears twice", name, wf, w.Name)
		}
		var dims []jsonInt
		if len(w.RawShape) == 0 || string(w.RawShape) == "null" {
			return fmt.Errorf("tfjs: %s: %s (%q) has no shape", name, wf, w.Name)
		}
		if err := json.Unmarshal(w.RawShape, &dims); err != nil {
			return fmt.Errorf("tfjs: %s: %s (%q): shape: %v", name, wf, w.Name, err)
		}
		if len(dims) > MaxRank {
			return fmt.Errorf("tfjs: %s: %s (%q): shape has %d dimensions, more than %d", name, wf, w.Name, len(dims), MaxRank)
		}
		shape := make([]int, len(dims))
		n := int64(1)
		for k, d := range dims {
			if d < 0 {
				return fmt.Errorf("tfjs: %s: %s (%q): shape[%d] is %d, want >= 0", name, wf, w.Name, k, d)
			}
			if d > 0 && n > MaxWeightBytes/int64(d) {
				return fmt.Errorf("tfjs: %s: %s (%q): shape %v holds more than %d elements", name, wf, w.Name, dims, int64(MaxWeightBytes))
			}
			n *= int64(d)
			shape[k] = int(d)
		}
		size, dtype, err := storedSize(w)
		if err != nil {
			return fmt.Errorf("tfjs: %s: %s (%q): %v", name, wf, w.Name, err)
		}
		if n*size > MaxWeightBytes-total {
			return fmt.Errorf("tfjs: %s: %s (%q): weights exceed %d bytes in all", name, wf, w.Name, int64(MaxWeightBytes))
		}
		plans[i] = plan{w: w, shape: shape, n: n, size: size, dtype: dtype, offset: total}
		total += n * size
		out[w.Name] = nil // reserve the name for the duplicate check
	}
	// The shards' sizes, before reading any.
	var have int64
	for pi, p := range g.Paths {
		fp, err := shardPath(p)
		if err != nil {
			return fmt.Errorf("tfjs: %s: %s.paths[%d]: %v", name, field, pi, err)
		}
		st, err := fs.Stat(fsys, fp)
		if err != nil {
			return fmt.Errorf("tfjs: %s: %s.paths[%d]: weight shard: %w", name, field, pi, err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("tfjs: %s: %s.paths[%d]: weight shard %s is not a regular file", name, field, pi, p)
		}
		have += st.Size()
		if have > MaxWeightBytes {
			return fmt.Errorf("tfjs: %s: %s: weight shards exceed %d bytes", name, field, int64(MaxWeightBytes))
		}
	}
	if have != total {
		return fmt.Errorf("tfjs: %s: %s: the manifest's tensors take %d bytes but the shards %v hold %d", name, field, total, g.Paths, have)
	}
	buf := make([]byte, 0, total)
	for pi, p := range g.Paths {
		fp, _ := shardPath(p)
		f, err := fsys.Open(fp)
		if err != nil {
			return fmt.Errorf("tfjs: %s: %s.paths[%d]: %w", name, field, pi, err)
		}
		b, err := io.ReadAll(io.LimitReader(f, total-int64(len(buf))+1))
		f.Close()
		if err != nil {
			return fmt.Errorf("tfjs: %s: %s.paths[%d]: %w", name, field, pi, err)
		}
		buf = append(buf, b...)
		if int64(len(buf)) > total {
			return fmt.Errorf("tfjs: %s: %s.paths[%d]: shard %s grew while being read", name, field, pi, p)
		}
	}
	if int64(len(buf)) != total {
		return fmt.Errorf("tfjs: %s: %s: read %d bytes of weights, want %d (a shard shrank while being read)", name, field, len(buf), total)
	}
	for _, pl := range plans {
		b := buf[pl.offset : pl.offset+pl.n*pl.size]
		t := &Tensor{Name: pl.w.Name, Shape: pl.shape, DType: pl.dtype}
		switch {
		case pl.w.Quantization != nil:
			t.F32 = dequantize(b, pl.n, pl.w)
		case pl.dtype == "float32":
			t.F32 = make([]float32, pl.n)
			for i := range t.F32 {
				t.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
		case pl.dtype == "int32":
			t.I32 = make([]int32, pl.n)
			for i := range t.I32 {
				t.I32[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
			}
		case pl.dtype == "bool":
			t.Bool = make([]bool, pl.n)
			for i := range t.Bool {
				t.Bool[i] = b[i] != 0
			}
		}
		out[pl.w.Name] = t
	}
	return nil
}

// shardPath turns a manifest path into a path within the model's directory,
// refusing absolute paths and paths that climb out of it.
func shardPath(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	if strings.Contains(p, "\\") || strings.HasPrefix(p, "/") || strings.Contains(p, "://") {
		return "", fmt.Errorf("path %q is not relative to the model's directory", p)
	}
	c := path.Clean(p)
	if !fs.ValidPath(c) {
		return "", fmt.Errorf("path %q leaves the model's directory", p)
	}
	return c, nil
}

func dequantize(b []byte, n int64, w *rawWeight) []float32 {
	out := make([]float32, n)
	switch w.Quantization.DType {
	case "float16":
		for i := range out {
			out[i] = half.ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case "uint8":
		scale, lo := float32(*w.Quantization.Scale), float32(*w.Quantization.Min)
		for i := range out {
			out[i] = float32(b[i])*scale + lo
		}
	case "uint16":
		scale, lo := float32(*w.Quantization.Scale), float32(*w.Quantization.Min)
		for i := range out {
			out[i] = float32(binary.LittleEndian.Uint16(b[2*i:]))*scale + lo
		}
	}
	return out
}
