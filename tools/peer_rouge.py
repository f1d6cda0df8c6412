#!/usr/bin/env python3
"""Pure-Python peer for `xmr bench rouge`.

ROUGE-L as pycocoevalcap's rouge.py computes it: dynamic-programming LCS
over lower-cased, space-split tokens, beta 1.2, the best precision and the
best recall over an image's references. Reads the captions (one a line),
the pairs to score ("caption image", one a line) and the number of captions
per image; prints the seconds the scoring took, then one score per pair
(repr, so that the Go side can compare them exactly).

Usage: peer_rouge.py CAPTIONS PAIRS PER_IMAGE
"""
import sys
import time


def lcs(a, b):
    if len(a) < len(b):
        a, b = b, a
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for j in range(1, len(b) + 1):
        for i in range(1, len(a) + 1):
            if a[i - 1] == b[j - 1]:
                t[i][j] = t[i - 1][j - 1] + 1
            else:
                t[i][j] = max(t[i - 1][j], t[i][j - 1])
    return t[len(a)][len(b)]


def rouge_l(cand, refs, beta=1.2):
    c = cand.lower().split(" ")
    prec, rec = [], []
    for ref in refs:
        r = ref.lower().split(" ")
        n = lcs(r, c)
        prec.append(n / float(len(c)))
        rec.append(n / float(len(r)))
    p, r = max(prec), max(rec)
    if p != 0 and r != 0:
        return ((1 + beta ** 2) * p * r) / float(r + beta ** 2 * p)
    return 0.0


def main():
    caps = open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]
    pairs = [tuple(map(int, l.split())) for l in open(sys.argv[2])]
    per = int(sys.argv[3])
    t0 = time.perf_counter()
    scores = [rouge_l(caps[i], caps[per * j:per * j + per]) for i, j in pairs]
    print(time.perf_counter() - t0)
    for s in scores:
        print(repr(s))


if __name__ == "__main__":
    main()
