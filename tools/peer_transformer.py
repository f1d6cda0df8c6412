#!/usr/bin/env python3
"""PyTorch peer for `xmr bench transformer`.

Times the same work as the Go benchmark on the CPU: one training step
(forward, backward, Adam update) of a stack of post-norm
torch.nn.TransformerEncoderLayer(batch_first=True) with a key-padding mask,
and one no-grad forward of a single sequence in eval mode. Prints one JSON
object: {"version", "threads", "train_ms", "infer_ms", "max_rss_mib", ...};
times are the median over the timed iterations after warm-up.
"""
import argparse
import json
import statistics
import time

import torch

from peerutil import peak_rss_mib


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d", type=int, default=1024)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ff", type=int, default=2048)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--tokens", type=int, default=36)
    p.add_argument("--single-tokens", type=int, default=12)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--infer-iters", type=int, default=50)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(a.d, a.heads, a.ff, a.dropout, activation="relu", batch_first=True)
    enc = torch.nn.TransformerEncoder(layer, a.layers, enable_nested_tensor=False)
    opt = torch.optim.Adam(enc.parameters(), lr=1e-4)

    x = torch.randn(a.batch, a.tokens, a.d)
    # Same padding pattern as the Go benchmark: sequence b has
    # tokens - (b % 8) valid tokens. PyTorch's mask is True at padding.
    lengths = [a.tokens - (b % 8) for b in range(a.batch)]
    pad = torch.tensor([[t >= n for t in range(a.tokens)] for n in lengths])

    def step():
        opt.zero_grad(set_to_none=False)
        y = enc(x, src_key_padding_mask=pad)
        loss = (y * y).mean()
        loss.backward()
        opt.step()

    enc.train()
    for _ in range(a.warmup):
        step()
    train, cpu = [], []
    for _ in range(a.iters):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        train.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)

    enc.eval()
    xs = torch.randn(1, a.single_tokens, a.d)
    infer = []
    with torch.no_grad():
        for _ in range(max(a.warmup, 5)):
            enc(xs)
        for _ in range(a.infer_iters):
            t0 = time.perf_counter()
            enc(xs)
            infer.append((time.perf_counter() - t0) * 1e3)

    print(json.dumps({
        "version": torch.__version__,
        "threads": torch.get_num_threads(),
        "train_ms": statistics.median(train),
        "infer_ms": statistics.median(infer),
        "train_runs_ms": train,
        "train_cpu_ms": statistics.median(cpu),
        "max_rss_mib": peak_rss_mib(),
    }))


if __name__ == "__main__":
    main()
