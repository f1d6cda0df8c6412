"""PyTorch peer of `xmr bench extract`: the CenterNet graph of
centernet.json + centernet.bin (the TF.js model package detect runs),
executed node by node with torch operations on the CPU.

The weights are read from the same two files: the manifest's float16
tensors are widened to float32, convolution filters are moved from TF's
HWIO layout to PyTorch's OIHW, and activations are NCHW tensors in the
channels-last memory format (what PyTorch recommends for convolutions on
the CPU; it measured a little faster here than contiguous NCHW). TF's "SAME" padding is
reproduced with an explicit (possibly asymmetric) pad.

Usage:
  peer_centernet.py --model DIR --iters N [--threads 2]
      [--input X.f32 --dump Y.f32]   # keypoints of one input, for checking
      [--barrier DIR --procs P]      # P copies at once start timing together

Prints one JSON line: torch version, threads, images, seconds (wall) and
cpu_seconds (the process's user+system time, all threads).
"""
import argparse
import base64
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F


def load(model_dir):
    with open(os.path.join(model_dir, "centernet.json")) as f:
        m = json.load(f)
    weights = {}
    for g in m["weightsManifest"]:
        buf = b"".join(open(os.path.join(model_dir, p), "rb").read() for p in g["paths"])
        off = 0
        for w in g["weights"]:
            n = int(np.prod(w["shape"])) if w["shape"] else 1
            q = w.get("quantization")
            if q and q["dtype"] == "float16":
                a = np.frombuffer(buf, "<f2", n, off).astype(np.float32)
                off += 2 * n
            elif w["dtype"] == "int32":
                a = np.frombuffer(buf, "<i4", n, off).astype(np.int64)
                off += 4 * n
            elif w["dtype"] == "float32" and not q:
                a = np.frombuffer(buf, "<f4", n, off)
                off += 4 * n
            else:
                raise SystemExit("unsupported weight %s" % w["name"])
            weights[w["name"]] = a.reshape(w["shape"])
    return m, weights


def attr_s(n, k):
    return base64.b64decode(n["attr"][k]["s"]).decode()


def same_pad(size, k, s):
    out = (size + s - 1) // s
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


class Net:
    """The graph compiled to a list of torch closures over NCHW tensors."""

    def __init__(self, m, weights, outputs):
        nodes = {n["name"]: n for n in m["modelTopology"]["node"]}
        order, seen = [], set()

        def visit(name):
            if name in seen:
                return
            seen.add(name)
            for i in nodes[name].get("input", []):
                visit(i.split(":")[0].lstrip("^"))
            order.append(name)

        for o in outputs:
            visit(o)
        self.outputs = outputs
        self.consts = {}
        self.steps = []
        for name in order:
            n = nodes[name]
            op = n["op"]
            ins = [i for i in n.get("input", []) if not i.startswith("^")]
            if op == "Const":
                a = weights[name]
                self.consts[name] = a
            elif op == "Placeholder":
                self.input = name
            else:
                self.steps.append((name, self.compile(n, op, ins)))

    def const(self, name):
        return torch.from_numpy(np.ascontiguousarray(self.consts[name]))

    def compile(self, n, op, ins):
        if op in ("_FusedConv2D", "Conv2D", "FusedDepthwiseConv2dNative", "DepthwiseConv2dNative"):
            w = self.consts[ins[1]]  # HWIO, or HWC1 for depthwise
            k, s = w.shape[0], int(n["attr"]["strides"]["list"]["i"][1])
            same = attr_s(n, "padding") == "SAME"
            dw = "Depthwise" in op
            if dw:
                wt = torch.from_numpy(np.ascontiguousarray(w.transpose(2, 3, 0, 1)))  # C,1,H,W
                groups = w.shape[2]
            else:
                wt = torch.from_numpy(np.ascontiguousarray(w.transpose(3, 2, 0, 1)))  # O,I,H,W
                groups = 1
            bias = self.const(ins[2]) if op.startswith("_Fused") or op.startswith("Fused") else None
            fused = []
            if "fused_ops" in n["attr"]:
                fused = [base64.b64decode(x).decode() for x in n["attr"]["fused_ops"]["list"]["s"]][1:]
            src = ins[0]

            def run(v, src=src, wt=wt, bias=bias, k=k, s=s, same=same, groups=groups, fused=fused):
                x = v[src]
                if same and k > 1:
                    pt, pb = same_pad(x.shape[2], k, s)
                    pl, pr = same_pad(x.shape[3], k, s)
                    if pt == pb and pl == pr:
                        y = F.conv2d(x, wt, bias, s, (pt, pl), 1, groups)
                    else:
                        y = F.conv2d(F.pad(x, (pl, pr, pt, pb)), wt, bias, s, 0, 1, groups)
                else:
                    y = F.conv2d(x, wt, bias, s, 0, 1, groups)
                for f in fused:
                    if f == "Relu":
                        y = torch.relu_(y)
                    elif f == "Relu6":
                        y = torch.clamp_(y, 0, 6)
                    else:
                        raise SystemExit("fused op " + f)
                return y
            return run
        if op in ("Add", "Mul", "Sub"):
            fn = {"Add": torch.add, "Mul": torch.mul, "Sub": torch.sub}[op]
            args = []
            for i in ins:
                if i in self.consts:
                    c = self.const(i).float()
                    if c.dim() == 4:  # NHWC -> NCHW
                        c = c.permute(0, 3, 1, 2).contiguous()
                    args.append(("c", c))
                else:
                    args.append(("v", i))

            def run(v, args=args, fn=fn):
                a = [x if kind == "c" else v[x] for kind, x in args]
                return fn(a[0], a[1])
            return run
        if op == "Relu":
            return lambda v, i=ins[0]: torch.relu(v[i])
        if op == "Relu6":
            return lambda v, i=ins[0]: torch.clamp(v[i], 0, 6)
        if op == "Sigmoid":
            return lambda v, i=ins[0]: torch.sigmoid(v[i])
        if op == "Identity":
            return lambda v, i=ins[0]: v[i]
        if op == "Mean":
            return lambda v, i=ins[0]: v[i].mean(dim=(2, 3), keepdim=True)
        if op == "ResizeBilinear":
            size = tuple(int(x) for x in self.consts[ins[1]])

            def run(v, i=ins[0], size=size):
                # TF1 sampling (align_corners and half_pixel_centers false)
                # at an integer factor: src = dst * in/out.
                x = v[i]
                h, w = x.shape[2], x.shape[3]
                ys = torch.arange(size[0], dtype=torch.float32) * (h / size[0])
                xs = torch.arange(size[1], dtype=torch.float32) * (w / size[1])
                y0 = ys.floor().long()
                x0 = xs.floor().long()
                y1 = torch.clamp(y0 + 1, max=h - 1)
                x1 = torch.clamp(x0 + 1, max=w - 1)
                dy = (ys - y0).view(1, 1, -1, 1)
                dx = (xs - x0).view(1, 1, 1, -1)
                a, b = x.index_select(2, y0), x.index_select(2, y1)
                tl, tr = a.index_select(3, x0), a.index_select(3, x1)
                bl, br = b.index_select(3, x0), b.index_select(3, x1)
                top = tl + (tr - tl) * dx
                bot = bl + (br - bl) * dx
                return top + (bot - top) * dy
            return run
        if op == "ConcatV2":
            axis = int(self.consts[ins[-1]])
            assert axis in (3, -1)
            return lambda v, ins=ins[:-1]: torch.cat([v[i] for i in ins], dim=1)
        raise SystemExit("op %s not supported" % op)

    def __call__(self, x_nhwc):
        v = {self.input: x_nhwc.permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)}
        for name, fn in self.steps:
            v[name] = fn(v)
        return [v[o] for o in self.outputs]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--input")
    ap.add_argument("--dump")
    ap.add_argument("--barrier", help="folder where N processes meet after their warm-up (with --procs)")
    ap.add_argument("--procs", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    m, weights = load(a.model)
    # The heads and the feature maps package detect returns.
    outs = ["tower_0/keypoints", "tower_0/wh", "tower_0/CenternetHead/mul", "tower_0/CenternetHead/Relu_1",
            "tower_0/CenternetHead/Relu", "tower_0/extern1/hard_swish/mul_1"]
    net = Net(m, weights, outs)
    with torch.inference_mode():
        if a.input:
            x = torch.from_numpy(np.fromfile(a.input, "<f4").reshape(1, 512, 512, 3).copy())
            kp = net(x)[0].permute(0, 2, 3, 1).contiguous().numpy()
            kp.astype("<f4").tofile(a.dump)
        x = torch.rand(1, 512, 512, 3) * 255
        net(x)  # warm-up
        if a.barrier:
            # Several copies run at once (one image each at a time): start
            # timing together, after every copy has loaded and warmed up.
            open(os.path.join(a.barrier, str(os.getpid())), "w").close()
            while len(os.listdir(a.barrier)) < a.procs:
                time.sleep(0.005)
        start = time.time()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(a.iters):
            net(x)
        s, cpu = time.perf_counter() - t0, time.process_time() - c0
        end = time.time()
    print(json.dumps({"version": torch.__version__, "threads": torch.get_num_threads(), "images": a.iters,
                      "seconds": s, "cpu_seconds": cpu, "start": start, "end": end}))


if __name__ == "__main__":
    main()
