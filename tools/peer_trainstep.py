#!/usr/bin/env python3
"""PyTorch peer for `xmr bench train-step`.

Times one training step of TERAN with a BERT text encoder on the CPU, as xmr
times its own: forward of both pipelines, the alignment loss (MrSw pooling
of the region-word cosines, VSE++ hinge with the hardest negatives or the
sum over negatives), backward, clip_grad_norm_ and Adam with a BERT group
and a group for the rest.

The modules follow the layout of the official TERAN code, as
tools/import_reference.py lays it out (img_txt_enc.{txt_enc.bert_model,
img_enc, img_proj, cap_proj, transformer_encoder_1, transformer_encoder_2},
HuggingFace's BERT names, sequence-first torch.nn.TransformerEncoder), at the
sizes given on the command line, so that the parameters are xmr's one for
one. The official modules that take no part in the loss (BERT's pooler, the
image encoder's fc, the text encoder's map) are left out, as xmr has none.

Inputs are random, of the shapes the Go benchmark uses: BATCH images of
REGIONS regions (non-negative features, zero boxes, all valid) and BATCH
captions of [CLS] + WORDS word pieces + [SEP].

Prints one JSON object: {"version", "threads", "step_s" (best), "steps_s",
"cpu_s" (process CPU time of the best step), "params", "max_rss_mib",
"blas_core", ...}.
"""
import argparse
import json
import os
import sys
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a = p.add_argument
    a("--vocab", type=int, required=True)
    a("--word-dim", type=int, required=True)
    a("--bert-layers", type=int, required=True)
    a("--bert-heads", type=int, required=True)
    a("--bert-ff", type=int, required=True)
    a("--max-positions", type=int, required=True)
    a("--text-dropout", type=float, default=0.1)
    a("--feat-dim", type=int, required=True)
    a("--pos-encoding", choices=["concat-and-process", "none"], default="concat-and-process")
    a("--slot0", choices=["zero", "zero-region"], default="zero")
    a("--img-hidden", type=int, required=True)
    a("--img-layers", type=int, required=True)
    a("--img-heads", type=int, required=True)
    a("--img-ff", type=int, required=True)
    a("--img-dropout", type=float, default=0.1)
    a("--embed", type=int, required=True)
    a("--layers", type=int, required=True)
    a("--heads", type=int, required=True)
    a("--ff", type=int, required=True)
    a("--dropout", type=float, default=0.1)
    a("--shared", type=int, choices=[0, 1], default=0)
    a("--batch", type=int, required=True)
    a("--regions", type=int, default=36)
    a("--words", type=int, default=12)
    a("--lr", type=float, required=True)
    a("--bert-lr", type=float, default=0, help="0: the same as --lr")
    a("--beta1", type=float, default=0.9)
    a("--grad-clip", type=float, default=2.0)
    a("--margin", type=float, default=0.2)
    a("--max-violation", type=int, choices=[0, 1], default=1)
    a("--threads", type=int, default=1)
    a("--warmup", type=int, default=1)
    a("--steps", type=int, default=3)
    return p.parse_args()


ARGS = parse()
# PyTorch's products go to libblas.so.3 (BLAS_INFO=generic), which is
# OpenBLAS here: its own thread pool follows OPENBLAS_NUM_THREADS, read when
# the library loads, not torch.set_num_threads. Both are set to --threads.
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from peerutil import peak_rss_mib


def blas_core():
    """The OpenBLAS kernels in use, when torch's BLAS is OpenBLAS."""
    try:
        import ctypes
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        lib.openblas_get_config.restype = ctypes.c_char_p
        return "%s (%s)" % (lib.openblas_get_corename().decode(), lib.openblas_get_config().decode().strip())
    except (OSError, AttributeError) as e:
        return "unknown: %s" % e


def key_padding(valid):
    """True at padding, as key_padding_mask wants it."""
    return ~valid


# ---------------------------------------------------------------- BERT
# HuggingFace's BertModel, its module names kept: post-norm layers, erf GELU,
# dropout on the embeddings, the attention probabilities and both outputs.

class BertEmbeddings(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.word_embeddings = nn.Embedding(a.vocab, a.word_dim)
        self.position_embeddings = nn.Embedding(a.max_positions, a.word_dim)
        self.token_type_embeddings = nn.Embedding(2, a.word_dim)
        self.LayerNorm = nn.LayerNorm(a.word_dim, eps=1e-12)
        self.dropout = nn.Dropout(a.text_dropout)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1])[None, :]
        x = self.word_embeddings(ids) + self.position_embeddings(pos) + self.token_type_embeddings(torch.zeros_like(ids))
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, a):
        super().__init__()
        d = a.word_dim
        self.heads = a.bert_heads
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.dropout = nn.Dropout(a.text_dropout)

    def forward(self, x, ext_mask):
        b, t, d = x.shape
        hd = d // self.heads

        def split(y):
            return y.view(b, t, self.heads, hd).transpose(1, 2)  # (B, h, T, hd)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        att = self.dropout(torch.softmax(q @ k.transpose(-1, -2) / (hd ** 0.5) + ext_mask, dim=-1))
        return (att @ v).transpose(1, 2).reshape(b, t, d)


class BertSelfOutput(nn.Module):
    def __init__(self, a, d_in):
        super().__init__()
        self.dense = nn.Linear(d_in, a.word_dim)
        self.LayerNorm = nn.LayerNorm(a.word_dim, eps=1e-12)
        self.dropout = nn.Dropout(a.text_dropout)

    def forward(self, h, x):
        return self.LayerNorm(self.dropout(self.dense(h)) + x)


class BertAttention(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.self, self.output = BertSelfAttention(a), BertSelfOutput(a, a.word_dim)

    def forward(self, x, ext_mask):
        return self.output(self.self(x, ext_mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.dense = nn.Linear(a.word_dim, a.bert_ff)

    def forward(self, x):
        return F.gelu(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.attention, self.intermediate = BertAttention(a), BertIntermediate(a)
        self.output = BertSelfOutput(a, a.bert_ff)  # HuggingFace's BertOutput: the same three modules

    def forward(self, x, ext_mask):
        h = self.attention(x, ext_mask)
        return self.output(self.intermediate(h), h)


class BertEncoder(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(a) for _ in range(a.bert_layers)])


class BertModel(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embeddings, self.encoder = BertEmbeddings(a), BertEncoder(a)

    def forward(self, ids, valid):
        ext = (1.0 - valid.float())[:, None, None, :] * -10000.0  # HuggingFace's extended attention mask
        x = self.embeddings(ids)
        for layer in self.encoder.layer:
            x = layer(x, ext)
        return x  # (C, T, W)


# ---------------------------------------------------------------- TERAN

def encoder(d, heads, ff, layers, dropout):
    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout, activation="relu")
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


class PositionalEncodingImageBoxes(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.map = nn.Sequential(nn.Linear(a.feat_dim + 5, a.img_hidden), nn.ReLU(), nn.Linear(a.img_hidden, a.img_hidden))

    def forward(self, x, boxes):  # x (B, S, F), boxes (B, S, 4)
        area = ((boxes[:, :, 2] - boxes[:, :, 0]) * (boxes[:, :, 3] - boxes[:, :, 1])).unsqueeze(2)
        return self.map(torch.cat([x, boxes, area], 2))


class ImageEncoder(nn.Module):  # the official visual.TransformerPostProcessing
    def __init__(self, a):
        super().__init__()
        self.a = a
        if a.pos_encoding == "concat-and-process":
            self.pos_encoding_image = PositionalEncodingImageBoxes(a)
        self.transformer_encoder = encoder(a.img_hidden, a.img_heads, a.img_ff, a.img_layers, a.img_dropout)

    def forward(self, feats, boxes, valid):  # (B, R, F), (B, R, 4), (B, 1+R) bool
        b = feats.shape[0]
        if self.a.slot0 == "zero-region":  # the official batches: a zero region in slot 0
            feats = torch.cat([feats.new_zeros(b, 1, feats.shape[2]), feats], 1)
            boxes = torch.cat([boxes.new_zeros(b, 1, 4), boxes], 1)
        x = self.pos_encoding_image(feats, boxes) if self.a.pos_encoding == "concat-and-process" else feats
        if self.a.slot0 == "zero":  # xmr's default: zeros after the box MLP
            x = torch.cat([x.new_zeros(b, 1, x.shape[2]), x], 1)
        x = self.transformer_encoder(x.permute(1, 0, 2), src_key_padding_mask=key_padding(valid))
        return x.permute(1, 0, 2)  # (B, 1+R, H)


class TextEncoder(nn.Module):  # the official text.EncoderTextBERT
    def __init__(self, a):
        super().__init__()
        self.bert_model = BertModel(a)

    def forward(self, ids, valid):
        return self.bert_model(ids, valid)


class Joint(nn.Module):  # the official teran.JointTextImageTransformerEncoder
    def __init__(self, a):
        super().__init__()
        self.txt_enc, self.img_enc = TextEncoder(a), ImageEncoder(a)
        self.img_proj, self.cap_proj = nn.Linear(a.img_hidden, a.embed), nn.Linear(a.word_dim, a.embed)
        self.transformer_encoder_1 = encoder(a.embed, a.heads, a.ff, a.layers, a.dropout)
        self.transformer_encoder_2 = None
        if not a.shared:
            self.transformer_encoder_2 = encoder(a.embed, a.heads, a.ff, a.layers, a.dropout)

    def forward_txt(self, ids, valid):
        c = self.cap_proj(self.txt_enc(ids, valid))
        x = self.transformer_encoder_1(c.permute(1, 0, 2), src_key_padding_mask=key_padding(valid))
        return F.normalize(x.permute(1, 0, 2), p=2, dim=2)  # (C, T, E)

    def forward_img(self, feats, boxes, valid):
        i = self.img_proj(self.img_enc(feats, boxes, valid))
        te = self.transformer_encoder_2 if self.transformer_encoder_2 is not None else self.transformer_encoder_1
        x = te(i.permute(1, 0, 2), src_key_padding_mask=key_padding(valid))
        return F.normalize(x.permute(1, 0, 2), p=2, dim=2)  # (B, 1+R, E)


class Model(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.img_txt_enc = Joint(a)


def mrsw(regions, words, region_mask, word_mask):
    """MrSw scores (B, C): for each word, its best region; summed over words.
    One product of every region by every word; masked regions cannot win a
    max and masked words add nothing."""
    b, l1, e = regions.shape
    c, l2, _ = words.shape
    a = (regions.reshape(b * l1, e) @ words.reshape(c * l2, e).t()).view(b, l1, c, l2)
    a = a.masked_fill(~region_mask[:, :, None, None], float("-inf"))
    return (a.max(1)[0] * word_mask[None].float()).sum(2)


def hinge(scores, margin, max_violation):
    """VSE++ hinge: the hardest negative of each direction, or the sum."""
    d = scores.diag().view(-1, 1)
    eye = torch.eye(scores.shape[0], dtype=torch.bool)
    cost_c = (margin + scores - d).clamp(min=0).masked_fill(eye, 0)
    cost_i = (margin + scores - d.t()).clamp(min=0).masked_fill(eye, 0)
    if max_violation:
        return cost_c.max(1)[0].sum() + cost_i.max(0)[0].sum()
    return cost_c.sum() + cost_i.sum()


def main(a):
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = Model(a)
    model.train()
    bert = [p for n, p in model.named_parameters() if ".bert_model." in n]
    rest = [p for n, p in model.named_parameters() if ".bert_model." not in n]
    opt = torch.optim.Adam([{"params": rest, "lr": a.lr}, {"params": bert, "lr": a.bert_lr or a.lr}], lr=a.lr, betas=(a.beta1, 0.999))
    params = list(model.parameters())

    b, r, t = a.batch, a.regions, a.words + 2
    feats = torch.randn(b, r, a.feat_dim).clamp(min=0)  # bottom-up features are non-negative
    boxes = torch.zeros(b, r, 4)
    img_valid = torch.ones(b, 1 + r, dtype=torch.bool)
    region_mask = img_valid.clone()
    region_mask[:, 0] = False  # slot 0 never aligns
    ids = torch.randint(5, a.vocab, (b, t))
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS], [SEP]
    txt_valid = torch.ones(b, t, dtype=torch.bool)
    word_mask = txt_valid.clone()
    word_mask[:, 0] = word_mask[:, -1] = False  # [CLS] and [SEP] do not align

    enc = model.img_txt_enc

    def step():
        opt.zero_grad()
        regions = enc.forward_img(feats, boxes, img_valid)
        words = enc.forward_txt(ids, txt_valid)
        loss = hinge(mrsw(regions, words, region_mask, word_mask), a.margin, a.max_violation)
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, a.grad_clip)
        opt.step()
        return float(loss)

    for _ in range(a.warmup):
        step()
    times, cpus = [], []
    for _ in range(a.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    best = min(range(len(times)), key=times.__getitem__)
    print(json.dumps({
        "version": torch.__version__,
        "threads": torch.get_num_threads(),
        "step_s": times[best],
        "steps_s": times,
        "cpu_s": cpus[best],
        "params": sum(p.numel() for p in params),
        "max_rss_mib": peak_rss_mib(),
        "blas_core": blas_core(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "python": sys.version.split()[0],
    }))


if __name__ == "__main__":
    main(ARGS)
