#!/usr/bin/env python3
"""A quick probe of image features: how well a simple model retrieves with them.

Trains, in PyTorch, a linear map of each image's global vector against the
mean of a caption's word embeddings, both L2-normalised, with the symmetric
InfoNCE loss (temperature --temp), Adam, for --budget seconds on 2 threads,
and prints the best dev rsum (R@1, 5, 10 both ways, in percent) of its
validations (every 400 iterations and at the end) as one JSON object. It reads
a precomp directory ({train,dev}_ims.npy of shape (N, D), or (N, R, D) whose
rows are averaged; {train,dev}_caps.txt with 5 captions per image), such as
the global/ copy that `xmr extract` writes. Its options choose what is probed:
--norm (none; std: each channel standardised with the train split's mean and
deviation; l2; ln or bn: a LayerNorm or BatchNorm layer first) and --cols
LO:HI (a range of channels: the maps of `xmr extract` are concatenated,
neck_s4 0:128, neck_s8 128:320, neck_s16 320:576, backbone_s32 576:1056).
docs/photos.md uses it to compare feature choices in a minute each; it is not
one of xmr's models.
"""
import argparse
import json
import os
import re
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def tokens(s):
    return re.findall(r"[a-z0-9]+", s.lower())


def read_caps(path):
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def load_ims(d, split):
    x = np.load(os.path.join(d, split + "_ims.npy")).astype(np.float32)
    return x.mean(1) if x.ndim == 3 else x


def recall(s, per=5):
    """s (N images, N*per captions): R@1,5,10 both ways and their sum."""
    n = s.shape[0]
    ri = np.array([min(np.where(np.argsort(-s[i]) == j)[0][0] for j in range(per * i, per * i + per)) for i in range(n)])
    rt = np.array([np.where(np.argsort(-s[:, c]) == c // per)[0][0] for c in range(s.shape[1])])
    r = {}
    for k in (1, 5, 10):
        r["i2t_r%d" % k] = 100 * float(np.mean(ri < k))
        r["t2i_r%d" % k] = 100 * float(np.mean(rt < k))
    r["rsum"] = sum(r.values())
    return r


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--budget", type=float, default=60, help="seconds of training")
    p.add_argument("--norm", default="std", choices=["none", "std", "l2", "ln", "bn"])
    p.add_argument("--cols", default="", help="LO:HI, a range of feature channels")
    p.add_argument("--temp", type=float, default=0.05)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--embed", type=int, default=512)
    p.add_argument("--bs", type=int, default=128)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)

    tr, dv = load_ims(a.data, "train"), load_ims(a.data, "dev")
    if a.cols:
        lo, hi = map(int, a.cols.split(":"))
        tr, dv = tr[:, lo:hi], dv[:, lo:hi]
    if a.norm == "std":
        mu, sd = tr.mean(0), tr.std(0) + 1e-6
        tr, dv = (tr - mu) / sd, (dv - mu) / sd
    elif a.norm == "l2":
        tr = tr / np.linalg.norm(tr, axis=1, keepdims=True)
        dv = dv / np.linalg.norm(dv, axis=1, keepdims=True)
    tr, dv = torch.from_numpy(tr), torch.from_numpy(dv)
    tc, dc = read_caps(os.path.join(a.data, "train_caps.txt")), read_caps(os.path.join(a.data, "dev_caps.txt"))
    per = len(tc) // len(tr)

    counts = {}
    for c in tc:
        for w in tokens(c):
            counts[w] = counts.get(w, 0) + 1
    itos = ["<pad>", "<unk>"] + sorted(w for w, n in counts.items() if n >= 2)
    stoi = {w: i for i, w in enumerate(itos)}

    def encode(caps):
        seqs = [[stoi.get(w, 1) for w in tokens(c)][:40] or [1] for c in caps]
        ids = torch.zeros(len(seqs), max(len(s) for s in seqs), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s)
        return ids

    d = tr.shape[1]
    pre = {"ln": [nn.LayerNorm(d)], "bn": [nn.BatchNorm1d(d)]}.get(a.norm, [])
    img = nn.Sequential(*pre, nn.Linear(d, a.embed))
    emb = nn.Embedding(len(itos), a.embed)
    params = list(img.parameters()) + list(emb.parameters())
    opt = torch.optim.Adam(params, lr=a.lr)

    def texts(ids):
        m = (ids > 0).float().unsqueeze(-1)
        return F.normalize((emb(ids) * m).sum(1) / m.sum(1).clamp(min=1), dim=-1)

    def evaluate():
        img.eval()
        with torch.no_grad():
            s = (F.normalize(img(dv), dim=-1) @ texts(dev_ids).t()).numpy()
        img.train()
        return recall(s, per)

    dev_ids = encode(dc)
    start, it, best = time.time(), 0, None
    while time.time() - start < a.budget:
        order = rng.permutation(len(tc))
        for b in range(0, len(order) - a.bs + 1, a.bs):
            idx = order[b : b + a.bs]
            s = F.normalize(img(tr[idx // per]), dim=-1) @ texts(encode([tc[i] for i in idx])).t()
            same = torch.from_numpy((idx[:, None] // per) == (idx[None] // per)) & ~torch.eye(len(idx), dtype=torch.bool)
            z = (s / a.temp).masked_fill(same, -1e9)
            target = torch.arange(len(idx))
            loss = (F.cross_entropy(z, target) + F.cross_entropy(z.t(), target)) / 2
            opt.zero_grad()
            loss.backward()
            opt.step()
            it += 1
            done = time.time() - start >= a.budget
            if done or it % 400 == 0:
                r = evaluate()
                if best is None or r["rsum"] > best["rsum"]:
                    best = dict(r, iters=it, seconds=round(time.time() - start))
            if done:
                break
    print(json.dumps({"best_dev": best, "args": vars(a), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
