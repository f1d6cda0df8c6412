#!/usr/bin/env python3
"""Re-ranking by neighbours, probed on saved similarity matrices.

docs/photos.md ("Neighbours in the collection") measures two ways to use
what an index knows before any query, on a fusion of models: database-side
augmentation (each photo or caption of the collection scored as itself plus
alpha times the mean score of its k nearest items of the collection) and
query expansion through a training set (a query scored as itself plus alpha
times the mean scores of its k nearest training items). This script is that
measurement; it is not part of xmr.

  prepare --karpathy FILE --out DIR
      writes four Karpathy files into DIR, every image in split "val",
      5 captions an image: val.json (the N val photos and their captions),
      valbank.json (the val photos with the bank's 5N captions: the first
      caption of each of the first 5N training photos), trainval.json (N
      training photos, every sixth, with the val captions) and
      trainbank.json (those photos with the bank's captions).
  score --sims DIR --weights W1,W2,...
      reads DIR/{val,valbank,trainval,trainbank}-K.npy, member K's matrix
      (images x captions, as `xmr eval --save-sims` writes it) of each file
      above, fuses them as xmr eval does (each query's scores standardised
      over what it ranks, then weighted), and prints one line a setting:
      the fusion, the fusion with the bank's captions as a query bank of
      text searches (beta --beta, per unit of the weights' sum), then each
      re-ranking, with R@1/5/10 both ways and rsum.

Between the two: `xmr extract --images DIR/F.json --image-root IMAGES --ids
filename --splits dev --taps s32 --out DIR/F` for each file F, then
`xmr eval --checkpoint MEMBER_K --data DIR/F --split dev --no-ndcg
--save-sims SIMS/F-K.npy` for each member K.
"""
import argparse
import json
import os

import numpy as np

FILES = ("val", "valbank", "trainval", "trainbank")


def prepare(args):
    with open(args.karpathy, encoding="utf-8") as f:
        data = json.load(f)
    train = [im for im in data["images"] if im["split"] == "train"]
    val = [im for im in data["images"] if im["split"] == "val"]
    n = len(val)
    # As many bank photos as val photos, and 5 bank captions a val photo,
    # so that every file holds 5 captions an image.
    bank_photos = train[::6][:n]
    bank_caps = [im["sentences"][0] for im in train[: 5 * n]]
    if n == 0 or len(bank_photos) < n or len(bank_caps) < 5 * n:
        raise SystemExit(f"{args.karpathy}: {n} val photos and {len(train)} training photos: "
                         "want at least one val photo and 6 training photos for each")
    val_caps = [s for im in val for s in im["sentences"][:5]]
    if len(val_caps) != 5 * n:
        raise SystemExit(f"{args.karpathy}: a val photo has fewer than 5 captions")

    def images(photos, caps):
        return [dict(im, split="val", sentences=caps[5 * i: 5 * i + 5]) for i, im in enumerate(photos)]

    out = {
        "val": images(val, val_caps),
        "valbank": images(val, bank_caps),
        "trainval": images(bank_photos, val_caps),
        "trainbank": images(bank_photos, bank_caps),
    }
    os.makedirs(args.out, exist_ok=True)
    for name, ims in out.items():
        path = os.path.join(args.out, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"dataset": data.get("dataset", ""), "images": ims}, f)
        print(f"wrote {path}: {len(ims)} images, {5 * len(ims)} captions")


def recalls(by_image, by_caption):
    """R@1/5/10 image-to-text (rows of by_image) and text-to-image (columns
    of by_caption), in percent; caption j belongs to image j // 5. Ties are
    broken by index, the smaller first, as xmr eval breaks them."""
    n, m = by_image.shape
    gt = np.arange(m) // 5
    # An image's rank: the captions above its best own caption (the first
    # of its best, on ties).
    best = 5 * np.arange(n) + by_image.reshape(n, n, 5)[np.arange(n), np.arange(n)].argmax(1)
    own = by_image[np.arange(n), best][:, None]
    before = np.arange(m)[None, :] < best[:, None]
    r_i = (by_image > own).sum(1) + ((by_image == own) & before).sum(1)
    truth = by_caption[gt, np.arange(m)][None, :]
    above = np.arange(n)[:, None] < gt[None, :]
    r_t = (by_caption > truth).sum(0) + ((by_caption == truth) & above).sum(0)
    return [100 * np.mean(r_i < k) for k in (1, 5, 10)], [100 * np.mean(r_t < k) for k in (1, 5, 10)]


def report(name, by_image, by_caption):
    i2t, t2i = recalls(by_image, by_caption)
    rsum = sum(i2t) + sum(t2i)
    print(f"{name:44s} i2t {i2t[0]:.1f}/{i2t[1]:.1f}/{i2t[2]:.1f} "
          f"t2i {t2i[0]:.1f}/{t2i[1]:.1f}/{t2i[2]:.1f} rsum {rsum:.1f}", flush=True)


def standardised(x, axis):
    return (x - x.mean(axis, keepdims=True)) / x.std(axis, keepdims=True)


def correlation(a, b, axis):
    """Pearson correlations between the rows (axis 1) or the columns
    (axis 0) of a and of b."""
    a, b = standardised(a, axis), standardised(b, axis)
    return (a @ b.T if axis == 1 else a.T @ b) / a.shape[axis]


def nearest(sim, k):
    return np.argsort(-sim, axis=1)[:, :k]


def score(args):
    w = np.array([float(x) for x in args.weights.split(",")])
    mats = {}
    for f in FILES:
        mats[f] = []
        for k in range(len(w)):
            path = os.path.join(args.sims, f"{f}-{k}.npy")
            m = np.load(path).astype(np.float64)
            if m.ndim != 2 or m.shape[1] != 5 * m.shape[0]:
                raise SystemExit(f"{path}: shape {m.shape}, want (N, 5N)")
            mats[f].append(m)
    val = mats["val"]
    # As eval fuses: each query standardised over what it ranks.
    by_image = sum(wk * standardised(m, 1) for wk, m in zip(w, val))
    by_caption = sum(wk * standardised(m, 0) for wk, m in zip(w, val))
    bank = sum(wk * standardised(m, 0) for wk, m in zip(w, mats["valbank"]))
    bank_rows = sum(wk * standardised(m, 1) for wk, m in zip(w, mats["trainval"]))
    # One standardisation for every file (the val matrices' moments), for
    # the neighbours' correlations.
    moments = [(m.mean(), m.std()) for m in val]

    def overall(f):
        return sum(wk * (m - mu) / sd for wk, m, (mu, sd) in zip(w, mats[f], moments))

    vb, tv, tb = overall("valbank"), overall("trainval"), overall("trainbank")

    report("fused", by_image, by_caption)
    b = args.beta / w.sum()
    top = (b * bank).max(1, keepdims=True)
    offset = (top[:, 0] + np.log(np.mean(np.exp(b * bank - top), 1))) / b
    t2i = by_caption - offset[:, None]
    report(f"fused, bank of {bank.shape[1]} captions", by_image, t2i)

    photo_sim = correlation(vb, vb, 1)      # val photos, by their scores for the bank's captions
    caption_sim = correlation(tv, tv, 0)    # val captions, by their scores for the bank's photos
    np.fill_diagonal(photo_sim, -np.inf)
    np.fill_diagonal(caption_sim, -np.inf)
    n, m = by_image.shape
    gt = np.arange(m) // 5
    same = np.mean(gt[nearest(caption_sim, 4)] == gt[:, None])
    print(f"a caption's 4 nearest captions are its photo's: {100 * same:.1f}%")
    for k in (1, 2, 4, 8):
        nc, ni = nearest(caption_sim, k), nearest(photo_sim, k)
        for a in (0.25, 0.5, 1.0):
            report(f"DBA captions k {k} alpha {a}", by_image + a * by_image[:, nc].mean(2), t2i)
            report(f"DBA photos k {k} alpha {a}", by_image,
                   by_caption + a * by_caption[ni].mean(1) - offset[:, None])
    own = np.array([[o for o in range(5 * gt[j], 5 * gt[j] + 5) if o != j] for j in range(m)])
    report("DBA captions, oracle (its photo's 4 others)", by_image + by_image[:, own].mean(2), t2i)

    photo_train = correlation(vb, tb, 1)    # val photos x bank photos
    caption_train = correlation(tv, tb, 0)  # val captions x bank captions
    for k in (3, 10, 30):
        ni, nc = nearest(photo_train, k), nearest(caption_train, k)
        for a in (0.1, 0.25, 0.5):
            report(f"QE photos k {k} alpha {a}", by_image + a * bank_rows[ni].mean(1), t2i)
            report(f"QE captions k {k} alpha {a}", by_image,
                   by_caption + a * bank[:, nc].mean(2) - offset[:, None])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("prepare", help="write the four Karpathy files")
    pp.add_argument("--karpathy", required=True, help="the data set's Karpathy file (train and val splits)")
    pp.add_argument("--out", required=True, help="directory for the files")
    ps = sub.add_parser("score", help="fuse the saved matrices and print each re-ranking's recall")
    ps.add_argument("--sims", required=True, help="directory of FILE-K.npy matrices")
    ps.add_argument("--weights", required=True, help="the members' fusion weights, comma-separated")
    ps.add_argument("--beta", type=float, default=2.0, help="the query bank's inverse temperature (xmr eval's default)")
    args = p.parse_args()
    if args.cmd == "prepare":
        prepare(args)
    else:
        score(args)


if __name__ == "__main__":
    main()
