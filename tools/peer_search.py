#!/usr/bin/env python3
"""PyTorch peer for `xmr bench search`.

Times exhaustive fine-grained (MrSw) scoring on the CPU, as a PyTorch user
would write it: one text query of W word vectors against N images of R
region vectors (text-to-image), and one image of R region vectors against
C captions of W word vectors (image-to-text), float32, L2-normalised random
vectors of dimension D. Scores: MrSw = sum over words of the max over
regions of the cosine. Prints one JSON object: {"version", "threads",
"t2i_ms", "i2t_ms", "t2i_bytes", "i2t_bytes"}; times are medians over
--reps runs after one warm-up.
"""
import argparse
import json
import statistics
import time

import torch


def unit(*shape):
    x = torch.randn(*shape, dtype=torch.float32)
    return x / x.norm(dim=-1, keepdim=True)


def timed(fn, reps):
    fn()  # warm-up
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--images", type=int, default=5000)
    p.add_argument("--captions", type=int, default=25000)
    p.add_argument("--regions", type=int, default=36)
    p.add_argument("--words", type=int, default=12)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=10)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    n, c, r, w, d = a.images, a.captions, a.regions, a.words, a.dim

    with torch.no_grad():
        imgs = unit(n * r, d)  # all regions, image after image
        query = unit(w, d)

        def t2i():
            sims = (imgs @ query.T).view(n, r, w)  # (N, R, W)
            scores = sims.max(dim=1).values.sum(dim=1)  # MrSw per image
            return torch.topk(scores, 10)

        t2i_ms = timed(t2i, a.reps)
        del imgs

        caps = unit(c * w, d)  # all words, caption after caption
        image = unit(r, d)

        def i2t():
            sims = (caps @ image.T).view(c, w, r)  # (C, W, R)
            scores = sims.max(dim=2).values.sum(dim=1)  # MrSw per caption
            return torch.topk(scores, 10)

        i2t_ms = timed(i2t, a.reps)

    print(json.dumps({
        "version": torch.__version__,
        "threads": torch.get_num_threads(),
        "t2i_ms": t2i_ms,
        "i2t_ms": i2t_ms,
        "t2i_bytes": n * r * d * 4,
        "i2t_bytes": c * w * d * 4,
    }))


if __name__ == "__main__":
    main()
