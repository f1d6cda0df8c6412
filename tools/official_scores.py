#!/usr/bin/env python3
"""The official TERAN evaluation's scores, in PyTorch, for `xmr eval --compat official`.

Reads region and word vectors that xmr wrote, lays them out as the official
evaluation does (mesnico/TERAN: evaluation.py's encode_data pads every image
to 37 slots and every caption to 88 tokens; models/loss.py's
AlignmentContrastiveLoss with return_similarity_mat scores them), and writes
its MrSw, MwSr, Symm and MrAVGw similarity matrices (images x captions), in
float32 (as the official code computes) and float64.

The layout of the official arrays, per item:
  image i:   slot 0 (the encoder's slot-0 output, never scored), its R
             regions in slots 1..R, then padding up to slot 36; length R + 1.
  caption c: [CLS] at 0, its n tokens at 1..n, [SEP] at n + 1, then padding
             up to 87; length n + 2.
The scoring cuts slot 0 of images and [CLS] plus the last two positions of
captions, masks positions at or past (length - 1) of an image and
(length - 3) of a caption, sets the masked cells of the alignment matrix to
0, and pools (max, then sum) over the whole padded axes.

The slots that must not count (slot 0, [CLS], [SEP], padding) are filled
with random vectors here, not zeros, so that the masking is what hides
them.

Input DIR/{img_vecs,img_counts,txt_vecs,txt_counts}.npy: the vectors (rows
of E floats, item after item) and the number of vectors of each item.
Output DIR/official_{mrsw,mwsr,symm,mravgw}_f32.npy, shape (N, C), and the
float64 matrices as text, DIR/official_{mrsw,mwsr,symm,mravgw}_f64.txt (one
row of C numbers per image).
"""
import sys

import numpy as np
import torch

IMAGE_SLOTS = 37  # slot 0 and 36 regions
CAPTION_TOKENS = 88  # [CLS], tokens, [SEP], padding


def unit_noise(gen, shape):
    x = torch.randn(*shape, generator=gen, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def padded(vecs, counts, width, extra, gen):
    """Items of counts[k] vectors, each at positions 1.. of a row of width
    slots whose other slots hold noise; returns (rows, lengths) with length
    counts[k] + extra (slot 0, and [SEP] for captions)."""
    e = vecs.shape[1]
    rows = unit_noise(gen, (len(counts), width, e))
    start = 0
    for k, n in enumerate(counts):
        if n + extra > width:
            raise SystemExit(f"item {k}: {n} vectors do not fit {width} slots")
        rows[k, 1:1 + n] = vecs[start:start + n]
        start += n
    if start != vecs.shape[0]:
        raise SystemExit(f"{vecs.shape[0]} vectors, counts sum to {start}")
    return rows, [n + extra for n in counts]


def official_pooled(img, img_len, cap, cap_len):
    """The alignment scores of every image against every caption."""
    regions = img[:, 1:, :]  # slot 0 cut
    words = cap[:, 1:-2, :]  # [CLS] and the last two positions cut
    r_len = torch.tensor([n - 1 for n in img_len])
    w_len = torch.tensor([n - 3 for n in cap_len])
    nr, nw = regions.shape[1], words.shape[1]
    # a[i, c, r, w] = <region r of image i, word w of caption c>
    a = torch.einsum("ird,cwd->icrw", regions, words)
    r_masked = torch.arange(nr)[None, :] >= r_len[:, None]  # (N, 36)
    w_masked = torch.arange(nw)[None, :] >= w_len[:, None]  # (C, 85)
    masked = r_masked[:, None, :, None] | w_masked[None, :, None, :]
    a = a.masked_fill(masked, 0)
    best_region = a.max(dim=2).values  # (N, C, 85): each word's best region
    best_word = a.max(dim=3).values  # (N, C, 36): each region's best word
    mrsw = best_region.sum(dim=2)
    mwsr = best_word.sum(dim=2)
    return {
        "mrsw": mrsw,
        "mwsr": mwsr,
        "symm": mrsw + mwsr,
        "mravgw": mrsw / w_len.to(a.dtype)[None, :],
    }


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: official_scores.py DIR")
    d = sys.argv[1]
    gen = torch.Generator().manual_seed(28)
    iv = torch.from_numpy(np.load(f"{d}/img_vecs.npy").astype(np.float64))
    tv = torch.from_numpy(np.load(f"{d}/txt_vecs.npy").astype(np.float64))
    ic = [int(n) for n in np.load(f"{d}/img_counts.npy")]
    tc = [int(n) for n in np.load(f"{d}/txt_counts.npy")]
    img, img_len = padded(iv, ic, IMAGE_SLOTS, 1, gen)
    cap, cap_len = padded(tv, tc, CAPTION_TOKENS, 2, gen)
    with torch.no_grad():
        for name, dtype in (("f32", torch.float32), ("f64", torch.float64)):
            out = official_pooled(img.to(dtype), img_len, cap.to(dtype), cap_len)
            for k, v in out.items():
                if dtype == torch.float32:
                    np.save(f"{d}/official_{k}_f32.npy", v.numpy())
                else:  # as text, every digit: a float64 .npy reads as float32 in xmr
                    np.savetxt(f"{d}/official_{k}_f64.txt", v.numpy(), fmt="%.17g")


if __name__ == "__main__":
    main()
