package nn

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/tools"
)

// torchScript rebuilds each layer in PyTorch from the state_dict the test
// sends (names from Params, so the names are checked too, strictly), runs
// it in eval mode on the same inputs and prints the outputs. Gradients stay
// enabled so that PyTorch takes its reference (not its fused fast) path.
const torchScript = `
import json, sys
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

torch.set_num_threads(1)
req = json.load(sys.stdin)

def T(v):
    return torch.tensor(v["data"], dtype=torch.float32).reshape(v["shape"])

def load(m, state):
    m.load_state_dict({k: T(v) for k, v in state.items()}, strict=True)
    m.eval()

def pad(inp, key):
    return (T(inp[key]) == 0) if key in inp else None

def causal(n):
    return torch.triu(torch.ones(n, n, dtype=torch.bool), 1)

res = []
for c in req["cases"]:
    k, cfg, inp = c["kind"], c["config"], c["inputs"]
    last = None
    if k == "mha":
        m = torch.nn.MultiheadAttention(cfg["d"], cfg["heads"], batch_first=True)
        load(m, c["state"])
        q, kk, v = T(inp["q"]), T(inp["k"]), T(inp["v"])
        am = causal(q.shape[1]) if cfg["causal"] else None
        out, _ = m(q, kk, v, key_padding_mask=pad(inp, "valid"), attn_mask=am, need_weights=False)
    elif k == "encoder":
        m = torch.nn.TransformerEncoderLayer(cfg["d"], cfg["heads"], cfg["ff"], 0.1, activation=cfg["act"], batch_first=True)
        load(m, c["state"])
        out = m(T(inp["x"]), src_key_padding_mask=pad(inp, "valid"))
    elif k == "decoder":
        m = torch.nn.TransformerDecoderLayer(cfg["d"], cfg["heads"], cfg["ff"], 0.1, activation=cfg["act"], batch_first=True)
        load(m, c["state"])
        x = T(inp["x"])
        out = m(x, T(inp["mem"]), tgt_mask=causal(x.shape[1]), tgt_key_padding_mask=pad(inp, "valid"),
                memory_key_padding_mask=pad(inp, "mem_valid"))
    elif k in ("gru", "lstm"):
        cls = torch.nn.GRU if k == "gru" else torch.nn.LSTM
        m = cls(cfg["in"], cfg["hidden"], cfg["layers"], batch_first=True, bidirectional=cfg["bi"])
        load(m, c["state"])
        x = T(inp["x"])
        packed = pack_padded_sequence(x, torch.tensor(cfg["lengths"]), batch_first=True, enforce_sorted=False)
        out, h = m(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        if k == "lstm":
            h = h[0]
        last = torch.cat([h[-2], h[-1]], 1) if cfg["bi"] else h[-1]
    elif k == "conv1d":
        m = torch.nn.Conv1d(cfg["in"], cfg["out"], cfg["kernel"], padding=cfg["padding"])
        load(m, c["state"])
        out = m(T(inp["x"]).transpose(1, 2)).transpose(1, 2)
    else:
        raise SystemExit("unknown kind " + k)
    r = {"out": out.detach().flatten().tolist()}
    if last is not None:
        r["last"] = last.detach().flatten().tolist()
    res.append(r)
print(json.dumps({"results": res}))
`

type jsonTensor struct {
	Shape []int     `json:"shape"`
	Data  []float32 `json:"data"`
}

func jt(t *tensor.Tensor) jsonTensor { return jsonTensor{t.Shape, t.Data} }

func stateDict(ps []Named) map[string]jsonTensor {
	m := map[string]jsonTensor{}
	for _, p := range ps {
		m[p.Name] = jt(p.T)
	}
	return m
}

type torchCase struct {
	Kind   string                `json:"kind"`
	Config map[string]any        `json:"config"`
	State  map[string]jsonTensor `json:"state"`
	Inputs map[string]jsonTensor `json:"inputs"`
	// Go's outputs, compared with PyTorch's.
	out, last *tensor.Tensor
	name      string
}

// torchPython returns an interpreter with torch (tools.FindPython), or
// skips the test.
func torchPython(t *testing.T) string {
	py, err := tools.FindPython(context.Background(), "", "torch")
	if err != nil {
		t.Skipf("PyTorch cross-check skipped (the naive-loop tests still ran; Debian: apt-get install python3-torch): %v", err)
	}
	return py
}

func TestMatchesPyTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("PyTorch cross-check skipped in -short mode")
	}
	py := torchPython(t)
	var cases []torchCase
	rng := newRNG(11)

	// Attention: self with padding, self causal, cross with Tq != Tk.
	m := NewMultiheadAttention(rng, 8, 2, 0.1)
	randomise(m.InProjB, m.OutProj.B)
	x, mem := randn(1, 3, 5, 8), randn(2, 3, 4, 8)
	xv, mv := validMask(5, 5, 3, 2), validMask(4, 4, 1, 3)
	for _, c := range []struct {
		name   string
		q, k   *tensor.Tensor
		valid  *tensor.Tensor
		causal bool
	}{
		{"mha-self", x, x, xv, false},
		{"mha-causal", x, x, xv, true},
		{"mha-cross", x, mem, mv, false},
	} {
		cases = append(cases, torchCase{Kind: "mha", name: c.name,
			Config: map[string]any{"d": 8, "heads": 2, "causal": c.causal},
			State:  stateDict(m.Params()),
			Inputs: map[string]jsonTensor{"q": jt(c.q), "k": jt(c.k), "v": jt(c.k), "valid": jt(c.valid)},
			out:    m.Forward(nil, c.q, c.k, c.k, c.valid, c.causal)})
	}
	for _, act := range []Activation{ReLU, GELU} {
		enc := NewTransformerEncoderLayer(rng, 8, 4, 16, 0.1, act)
		randomise(enc.SelfAttn.InProjB, enc.Norm1.Gamma, enc.Norm2.Beta)
		cases = append(cases, torchCase{Kind: "encoder", name: "encoder-" + act.String(),
			Config: map[string]any{"d": 8, "heads": 4, "ff": 16, "act": act.String()},
			State:  stateDict(enc.Params()),
			Inputs: map[string]jsonTensor{"x": jt(x), "valid": jt(xv)},
			out:    enc.Forward(nil, x, xv)})
		dec := NewTransformerDecoderLayer(rng, 8, 2, 16, 0.1, act)
		randomise(dec.CrossAttn.InProjB, dec.Norm2.Gamma)
		cases = append(cases, torchCase{Kind: "decoder", name: "decoder-" + act.String(),
			Config: map[string]any{"d": 8, "heads": 2, "ff": 16, "act": act.String()},
			State:  stateDict(dec.Params()),
			Inputs: map[string]jsonTensor{"x": jt(x), "mem": jt(mem), "valid": jt(xv), "mem_valid": jt(mv)},
			out:    dec.Forward(nil, x, mem, xv, mv)})
	}
	seqX := randn(3, 4, 6, 3)
	lengths := []int{6, 2, 5, 1}
	for _, bi := range []bool{false, true} {
		for _, layers := range []int{1, 2} {
			g := NewGRU(rng, 3, 5, layers, bi)
			out, last := g.Forward(nil, seqX, lengths)
			l := NewLSTM(rng, 3, 5, layers, bi)
			lout, llast := l.Forward(nil, seqX, lengths)
			cfg := map[string]any{"in": 3, "hidden": 5, "layers": layers, "bi": bi, "lengths": lengths}
			in := map[string]jsonTensor{"x": jt(seqX)}
			cases = append(cases,
				torchCase{Kind: "gru", name: "gru", Config: cfg, State: stateDict(g.Params()), Inputs: in, out: out, last: last},
				torchCase{Kind: "lstm", name: "lstm", Config: cfg, State: stateDict(l.Params()), Inputs: in, out: lout, last: llast})
		}
	}
	conv := NewConv1d(rng, 3, 4, 3, 1)
	cases = append(cases, torchCase{Kind: "conv1d", name: "conv1d",
		Config: map[string]any{"in": 3, "out": 4, "kernel": 3, "padding": 1},
		State:  stateDict(conv.Params()), Inputs: map[string]jsonTensor{"x": jt(seqX)}, out: conv.Forward(nil, seqX)})

	req, err := json.Marshal(map[string]any{"cases": cases})
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "torch_check.py")
	if err := os.WriteFile(script, []byte(torchScript), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, script)
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	var resp struct {
		Results []struct {
			Out  []float64 `json:"out"`
			Last []float64 `json:"last"`
		} `json:"results"`
	}
	if err := json.Unmarshal(outb, &resp); err != nil {
		t.Fatalf("python output: %v\n%s", err, outb)
	}
	if len(resp.Results) != len(cases) {
		t.Fatalf("%d results for %d cases", len(resp.Results), len(cases))
	}
	for i, c := range cases {
		r := resp.Results[i]
		compare := func(what string, got *tensor.Tensor, want []float64) {
			if len(got.Data) != len(want) {
				t.Errorf("case %d %s %s: %d values, PyTorch %d", i, c.name, what, len(got.Data), len(want))
				return
			}
			for j, w := range want {
				if d := math.Abs(float64(got.Data[j]) - w); d > 1e-4 || math.IsNaN(float64(got.Data[j])) {
					t.Errorf("case %d %s %s: element %d = %.7g, PyTorch %.7g", i, c.name, what, j, got.Data[j], w)
					return
				}
			}
		}
		compare("out", c.out, r.Out)
		if c.last != nil {
			compare("last", c.last, r.Last)
		}
	}
}
