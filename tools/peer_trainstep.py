#!/usr/bin/env python3
"""PyTorch peer for `xmr bench train-step`.

Times one training step of TERAN with a BERT text encoder on the CPU, as xmr
times its own: forward of both pipelines, the alignment loss (MrSw pooling
of the region-word cosines, VSE++ hinge with the hardest negatives or the
sum over negatives), backward, clip_grad_norm_ and Adam with a BERT group
and a group for the rest.

The modules are teran_torch.py's (written beside this script by
tools.WriteScript), as tools/import_reference.py builds them too: the layout
of the official TERAN code (img_txt_enc.{txt_enc.bert_model, img_enc,
img_proj, cap_proj, transformer_encoder_1, transformer_encoder_2},
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

With --serve, the steps alternate with the caller's own: after the warm-up
the script prints {"ready": true, "params": N}, then times one step for
each line "step" on its standard input and answers {"step_s", "cpu_s"};
when its input ends it prints the summary above, over the steps taken.
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
    a("--serve", action="store_true", help="take a step for each line 'step' on stdin (see above)")
    return p.parse_args()


ARGS = parse()
# PyTorch's products go to libblas.so.3 (BLAS_INFO=generic), which is
# OpenBLAS here: its own thread pool follows OPENBLAS_NUM_THREADS, read when
# the library loads, not torch.set_num_threads. Both are set to --threads.
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)

import torch  # noqa: E402

from peerutil import peak_rss_mib  # noqa: E402
from teran_torch import BertModel, ImageEncoder, Joint, Model, TextEncoder, hinge  # noqa: E402


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


def build(a):
    """TERAN at a's sizes, BERT with dropout, slot 0 as xmr fills it; without
    the official modules that take no part in the loss."""
    txt = TextEncoder(BertModel(a.vocab, a.word_dim, a.bert_layers, a.bert_heads, a.bert_ff, a.max_positions, dropout=a.text_dropout))
    img = ImageEncoder(a.feat_dim, a.img_hidden, a.img_heads, a.img_ff, a.img_layers, a.img_dropout,
                       pos_encoding=a.pos_encoding == "concat-and-process", slot0=a.slot0)
    return Model(Joint(txt, img, a.embed, a.heads, a.ff, a.layers, a.dropout, shared=bool(a.shared)))


def mrsw(regions, words, region_mask, word_mask):
    """MrSw scores (B, C): for each word, its best region; summed over words.
    One product of every region by every word; masked regions cannot win a
    max and masked words add nothing."""
    b, l1, e = regions.shape
    c, l2, _ = words.shape
    a = (regions.reshape(b * l1, e) @ words.reshape(c * l2, e).t()).view(b, l1, c, l2)
    a = a.masked_fill(~region_mask[:, :, None, None], float("-inf"))
    return (a.max(1)[0] * word_mask[None].float()).sum(2)


def main(a):
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = build(a)
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

    def timed():
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)

    if a.serve:
        print(json.dumps({"ready": True, "params": sum(p.numel() for p in params)}), flush=True)
        for line in sys.stdin:
            if line.strip() != "step":
                sys.exit("unknown request %r: want 'step'" % line.strip())
            timed()
            print(json.dumps({"step_s": times[-1], "cpu_s": cpus[-1]}), flush=True)
        if not times:
            sys.exit("no step was asked for")
    else:
        for _ in range(a.steps):
            timed()
    best = min(range(len(times)), key=times.__getitem__)
    print(json.dumps({
        "version": torch.__version__,
        "threads": torch.get_num_threads(),
        "step_s": times[best],
        "steps_s": times,
        "cpu_s": cpus[best],
        "cpus_s": cpus,
        "params": sum(p.numel() for p in params),
        "max_rss_mib": peak_rss_mib(),
        "blas_core": blas_core(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "python": sys.version.split()[0],
    }))


if __name__ == "__main__":
    main(ARGS)
