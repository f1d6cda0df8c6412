package optim

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/tools"
)

// torchScript replays runs on torch.optim.Adam/AdamW: two parameter groups,
// per-step learning-rate factors, clip_grad_norm_ before each step. For each
// run it prints the final parameters, the moment estimates and the norms.
const torchScript = `
import json, sys
import torch
results = []
for cfg in json.load(sys.stdin):
    ps = [torch.tensor(p, dtype=torch.float32, requires_grad=True) for p in cfg["params"]]
    groups = [{"params": [ps[i] for i in g["idx"]], "lr": g["lr"], "weight_decay": g["wd"]} for g in cfg["groups"]]
    cls = torch.optim.AdamW if cfg["decoupled"] else torch.optim.Adam
    opt = cls(groups, lr=1.0, betas=(cfg["b1"], cfg["b2"]), eps=cfg["eps"], foreach=False)
    norms = []
    for step, grads in enumerate(cfg["grads"]):
        for g, p in zip(grads, ps):
            p.grad = torch.tensor(g, dtype=torch.float32)
        for g, base in zip(opt.param_groups, cfg["groups"]):
            g["lr"] = base["lr"] * cfg["factors"][step]
        norms.append(float(torch.nn.utils.clip_grad_norm_(ps, cfg["max_norm"])))
        opt.step()
    results.append({"params": [p.detach().flatten().tolist() for p in ps],
                    "exp_avg": [opt.state[p]["exp_avg"].flatten().tolist() for p in ps],
                    "exp_avg_sq": [opt.state[p]["exp_avg_sq"].flatten().tolist() for p in ps],
                    "norms": norms})
json.dump(results, sys.stdout)
`

// torchRun is one optimiser run done here, to be replayed by torch.
type torchRun struct {
	opt   *Adam
	ps    []*tensor.Tensor
	norms []float64
	in    map[string]any
}

func newTorchRun(t *testing.T, decoupled bool) *torchRun {
	rng := rand.New(rand.NewPCG(11, 12))
	ps := []*tensor.Tensor{randParam(rng, 3, 4), randParam(rng, 5), randParam(rng, 2, 3)}
	groups := []Group{
		{Name: "enc", Params: ps[:2], LR: 0.01, WeightDecay: 0.05},
		{Name: "head", Params: ps[2:], LR: 0.003},
	}
	sched := Product{Warmup{Iters: 3}, StepDecay{Every: 4, Gamma: 0.5}}
	cfg := Config{Beta1: 0.85, Beta2: 0.995, Eps: 1e-7, Schedule: sched}
	r := &torchRun{opt: mustAdam(t, decoupled, groups, cfg), ps: ps}
	const steps, maxNorm = 7, 3.0
	r.in = map[string]any{"decoupled": decoupled, "b1": cfg.Beta1, "b2": cfg.Beta2, "eps": cfg.Eps, "max_norm": maxNorm,
		"groups": []map[string]any{{"idx": []int{0, 1}, "lr": 0.01, "wd": 0.05}, {"idx": []int{2}, "lr": 0.003, "wd": 0.0}}}
	var params [][]float32
	for _, p := range ps {
		params = append(params, append([]float32(nil), p.Data...))
	}
	var grads [][][]float32
	var factors []float64
	for s := range steps {
		fillGrads(rng, ps...)
		var gs [][]float32
		for _, p := range ps {
			gs = append(gs, append([]float32(nil), p.Grad...))
		}
		grads = append(grads, gs)
		factors = append(factors, sched.Factor(s))
		r.norms = append(r.norms, ClipGradNorm(ps, maxNorm))
		r.opt.Step()
	}
	r.in["params"], r.in["grads"], r.in["factors"] = params, grads, factors
	return r
}

// TestAgainstPyTorch runs the same steps here and in torch.optim (Adam and
// AdamW) and compares parameters, moments and clipped norms.
func TestAgainstPyTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the PyTorch cross-check in -short mode")
	}
	python, err := tools.FindPython(context.Background(), "", "torch")
	if err != nil {
		t.Skipf("skipping the PyTorch cross-check (Debian: apt-get install python3-torch): %v", err)
	}
	runs := []*torchRun{newTorchRun(t, false), newTorchRun(t, true)}
	var in []map[string]any
	for _, r := range runs {
		in = append(in, r.in)
	}
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-c", torchScript)
	cmd.Stdin = bytes.NewReader(body)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	var out []struct {
		Params   [][]float64 `json:"params"`
		ExpAvg   [][]float64 `json:"exp_avg"`
		ExpAvgSq [][]float64 `json:"exp_avg_sq"`
		Norms    []float64   `json:"norms"`
	}
	if err := json.Unmarshal(outb, &out); err != nil {
		t.Fatalf("decode python output: %v\n%s", err, outb)
	}
	if len(out) != len(runs) {
		t.Fatalf("python returned %d runs, want %d", len(out), len(runs))
	}
	for k, r := range runs {
		o, got := r.opt, out[k]
		kind := "Adam"
		if o.Decoupled() {
			kind = "AdamW"
		}
		if len(got.Params) != len(r.ps) || len(got.Norms) != len(r.norms) {
			t.Fatalf("%s: python output has %d params and %d norms", kind, len(got.Params), len(got.Norms))
		}
		for s, n := range r.norms {
			if !near(n, got.Norms[s], 1e-5) {
				t.Errorf("%s step %d: grad norm %v, torch %v", kind, s, n, got.Norms[s])
			}
		}
		st := o.State()
		for i, p := range r.ps {
			check := func(what string, mine []float32, want []float64) {
				for j := range mine {
					if !near(float64(mine[j]), want[j], 2e-5) {
						t.Errorf("%s param %d %s[%d] = %v, torch %v", kind, i, what, j, mine[j], want[j])
					}
				}
			}
			check("value", p.Data, got.Params[i])
			check("exp_avg", st[o.names[i]+SuffixExpAvg].Data, got.ExpAvg[i])
			check("exp_avg_sq", st[o.names[i]+SuffixExpAvgSq].Data, got.ExpAvgSq[i])
		}
	}
}
