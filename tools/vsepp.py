#!/usr/bin/env python3
"""PyTorch peer for `xmr bench learn`: VSE++ trained for a wall-clock budget.

VSE++ (Faghri et al. 2018) as a PyTorch user writes it: word embeddings and a
GRU for the caption (its last state), a linear map of the image's global CNN
feature, both L2-normalised, cosine similarity, the hinge loss summed over
the batch's negatives for --warmup iterations and on the hardest negative
after, Adam, gradient-norm clipping. It reads a precomp directory
({train,dev,test}_caps.txt, 5 captions per image; {split}_ims.npy of shape
(N, D), or (N, R, D) whose regions are averaged), trains on train until
--budget seconds of training have passed, validates on dev after every
epoch (its time counted in the budget, as xmr's) and keeps the weights of the
best dev rsum, then evaluates them on test (or --test-split) with the VSE++ protocol (R@1, 5, 10
both directions). Prints one JSON object: {"version", "threads", "iters",
"epochs", "train_s", "best_dev_rsum", "test": {"r1_i2t", ..., "rsum"}}.
"""
import argparse
import copy
import json
import os
import re
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_caps(path):
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def tokenize(s):
    return re.findall(r"[a-z0-9]+|[^\sa-z0-9]", s.lower())


def load_split(d, split):
    caps = read_caps(os.path.join(d, split + "_caps.txt"))
    ims = np.load(os.path.join(d, split + "_ims.npy")).astype(np.float32)
    if ims.ndim == 3:
        ims = ims.mean(axis=1)
    per = len(caps) // len(ims)
    return caps, torch.from_numpy(ims), per


class Vocab:
    def __init__(self, captions, min_count=1):
        counts = {}
        for c in captions:
            for w in tokenize(c):
                counts[w] = counts.get(w, 0) + 1
        self.itos = ["<pad>", "<start>", "<end>", "<unk>"] + sorted(w for w, n in counts.items() if n >= min_count)
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def encode(self, captions, max_len):
        seqs = [[1] + [self.stoi.get(w, 3) for w in tokenize(c)][: max_len - 2] + [2] for c in captions]
        lengths = torch.tensor([len(s) for s in seqs])
        ids = torch.zeros(len(seqs), int(lengths.max()), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s)
        return ids, lengths


class VSE(nn.Module):
    def __init__(self, vocab_size, img_dim, word_dim, embed_size):
        super().__init__()
        self.fc = nn.Linear(img_dim, embed_size)
        r = np.sqrt(6.0) / np.sqrt(img_dim + embed_size)
        self.fc.weight.data.uniform_(-r, r)
        self.fc.bias.data.fill_(0)
        self.embed = nn.Embedding(vocab_size, word_dim)
        self.embed.weight.data.uniform_(-0.1, 0.1)
        self.rnn = nn.GRU(word_dim, embed_size, batch_first=True)

    def images(self, x):
        return F.normalize(self.fc(x), dim=-1)

    def texts(self, ids, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(ids), lengths, batch_first=True, enforce_sorted=False)
        _, h = self.rnn(packed)
        return F.normalize(h[-1], dim=-1)


def hinge(s, margin, hardest):
    d = s.diag().view(-1, 1)
    cost_c = (margin + s - d).clamp(min=0)  # image i vs captions j
    cost_i = (margin + s - d.t()).clamp(min=0)  # caption j vs images i
    eye = torch.eye(s.size(0), dtype=torch.bool)
    cost_c = cost_c.masked_fill(eye, 0)
    cost_i = cost_i.masked_fill(eye, 0)
    if hardest:
        return cost_c.max(1)[0].sum() + cost_i.max(0)[0].sum()
    return cost_c.sum() + cost_i.sum()


def recall(sims, per):
    """sims (N images, N*per captions): R@1,5,10 both directions, in percent."""
    n = sims.shape[0]
    ranks_i2t = np.zeros(n)
    for i in range(n):
        order = np.argsort(-sims[i])
        ranks_i2t[i] = min(np.where(order == j)[0][0] for j in range(per * i, per * i + per))
    ranks_t2i = np.zeros(sims.shape[1])
    for c in range(sims.shape[1]):
        order = np.argsort(-sims[:, c])
        ranks_t2i[c] = np.where(order == c // per)[0][0]
    out = {}
    for k in (1, 5, 10):
        out["r%d_i2t" % k] = 100.0 * np.mean(ranks_i2t < k)
        out["r%d_t2i" % k] = 100.0 * np.mean(ranks_t2i < k)
    out["rsum"] = sum(out.values())
    return out


@torch.no_grad()
def evaluate(model, vocab, caps, ims, per, max_len):
    model.eval()
    ids, lengths = vocab.encode(caps, max_len)
    sims = (model.images(ims) @ model.texts(ids, lengths).t()).numpy()
    model.train()
    return recall(sims, per)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--budget", type=float, default=240, help="seconds of training (validation included)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--word-dim", type=int, default=300)
    p.add_argument("--embed-size", type=int, default=1024)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--margin", type=float, default=0.2)
    p.add_argument("--warmup", type=int, default=200, help="iterations with the sum over negatives before the hardest negative")
    p.add_argument("--grad-clip", type=float, default=2.0)
    p.add_argument("--max-len", type=int, default=48)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--test-split", default="test", help="the split evaluated at the end (dev where the data has no test split)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)

    train_caps, train_ims, per = load_split(a.data, "train")
    dev_caps, dev_ims, dev_per = load_split(a.data, "dev")
    test_caps, test_ims, test_per = load_split(a.data, a.test_split)
    vocab = Vocab(train_caps)
    model = VSE(len(vocab.itos), train_ims.shape[1], a.word_dim, a.embed_size)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    batch = min(a.batch, len(train_caps))  # a train set smaller than a batch is one batch, as in xmr

    it, epoch, best, best_state = 0, 0, -1.0, None
    start = time.perf_counter()
    done = False
    while not done:
        order = rng.permutation(len(train_caps))
        for b in range(0, len(order) - batch + 1, batch):
            if time.perf_counter() - start >= a.budget:
                done = True
                break
            idx = order[b : b + batch]
            ids, lengths = vocab.encode([train_caps[i] for i in idx], a.max_len)
            im = model.images(train_ims[idx // per])
            tx = model.texts(ids, lengths)
            loss = hinge(im @ tx.t(), a.margin, it >= a.warmup)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
            opt.step()
            it += 1
        else:
            epoch += 1
            r = evaluate(model, vocab, dev_caps, dev_ims, dev_per, a.max_len)
            if r["rsum"] > best:
                best, best_state = r["rsum"], copy.deepcopy(model.state_dict())
    train_s = time.perf_counter() - start
    if best_state is not None:
        model.load_state_dict(best_state)
    test = evaluate(model, vocab, test_caps, test_ims, test_per, a.max_len)
    print(json.dumps({"version": torch.__version__, "threads": torch.get_num_threads(), "iters": it, "epochs": epoch,
                      "train_s": train_s, "best_dev_rsum": best, "test": test}))


if __name__ == "__main__":
    main()
