"""The PyTorch side of xmr's import test (cmd/xmr TestImportMatchesPyTorch).

    python3 import_reference.py OUT_DIR

Builds TERAN and TERN as the official code (mesnico/TERAN, mesnico/TERN)
lays them out -- the same module names, so the same state_dict names; the
modules of teran_torch.py (written beside this script by tools.WriteScript),
small, from the papers and the reference facts -- with random weights, and
writes into OUT_DIR:

  teran.pth          TERAN (separate final layers), torch.save zip format,
                     as the official train.py saves it: epoch, model,
                     optimizer (Adam after one step), scheduler, opt
                     (argparse.Namespace), config (the YAML dict), Eiters
  teran_legacy.pth   the same checkpoint, _use_new_zipfile_serialization=False
  tern.pth           TERN (shared final layers, I-CLS/T-CLS), zip format
  bert/              a HuggingFace BERT directory: config.json, vocab.txt,
                     model.safetensors (the format written by hand: no
                     safetensors package needed)
  bert_bin/          the same BERT as pytorch_model.bin in the legacy format
                     (as the original bert-base-uncased file), with the
                     "bert." prefix and LayerNorm gamma/beta of old files
  captions.txt, ids.npy, feats.npy, boxes.npy, nregions.npy   the inputs
  {teran,tern}_regions.npy, _words.npy   each real region's and word's
                     vector (slot 0, [CLS], [SEP] and padding left out),
                     concatenated item after item
  teran_scores.npy   the MrSw alignment scores (images x captions)
  tern_scores.npy    the I-CLS . T-CLS cosines
  {teran,tern}_loss.npy   the hinge loss with the hardest negatives (margin 0.2)
  bert_hidden.npy    the BERT directory's last hidden state of each real token

Everything runs on the CPU in a few seconds.
"""
import argparse
import collections
import json
import os
import sys

import numpy as np
import torch

from peerutil import write_safetensors
from teran_torch import BertModel, ImageEncoder, Joint, Model, TextEncoder, hinge

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(13)
torch.set_num_threads(1)

# Sizes: tiny, with every width different so that a transposed or swapped
# weight cannot pass unnoticed.
FEAT = 12          # region features = the visual pipeline's width (official: d_model = feat-dim)
IMG_LAYERS, IMG_FF = 2, 20
WORD, BERT_HEADS, BERT_FF, BERT_LAYERS, BERT_ALL_LAYERS, POSITIONS = 16, 2, 24, 2, 3, 32
EMBED, JOINT_LAYERS, JOINT_FF = 8, 2, 10
HEADS = 4          # every official nn.TransformerEncoderLayer has nhead=4

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "man", "woman", "riding", "horse", "on", "the", "beach",
         "dog", "red", "ball", "with", "two", "people", "sitting", "bench", "near", "water", "skate", "##board", "##ing",
         "boy", "street", "cat", "sleeping", "couch", "small", "white", "black", "in", "of"]
CAPTIONS = ["a man riding a horse on the beach", "a dog with a red ball",
            "two people sitting on a bench near the water", "a boy skateboarding on the street"]


def wordpiece(word):
    """Greedy longest-match-first WordPiece, as BERT's tokenizer."""
    out, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = ("##" if start > 0 else "") + word[start:end]
            if piece in VOCAB:
                out.append(VOCAB.index(piece))
                break
            end -= 1
        if end == start:
            return [VOCAB.index("[UNK]")]
        start = end
    return out


def token_ids(captions):
    seqs = [[2] + [i for w in c.split() for i in wordpiece(w)] + [3] for c in captions]
    lens = [len(s) for s in seqs]
    ids = torch.zeros(len(seqs), max(lens), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
    return ids, lens


def valid_mask(lens, n):
    """(len(lens), n) bool, True at the first lens[i] places of row i."""
    return torch.arange(n)[None, :] < torch.tensor(lens)[:, None]


def teran_model(shared):
    """TERAN (shared False: separate final layers) or TERN (shared), with
    every official module, the ones the joint model leaves unused too
    (BERT's pooler, the image encoder's fc, the text encoder's map)."""
    txt = TextEncoder(BertModel(len(VOCAB), WORD, BERT_LAYERS, BERT_HEADS, BERT_FF, POSITIONS, pooler=True), embed=EMBED)
    img = ImageEncoder(FEAT, FEAT, HEADS, IMG_FF, IMG_LAYERS, 0.1, fc=EMBED)  # d_model = feat-dim
    return Model(Joint(txt, img, EMBED, HEADS, JOINT_FF, JOINT_LAYERS, 0.1, shared))


def randomise(m):
    """Random weights everywhere (nn.TransformerEncoder copies one layer's
    initial weights, and biases start at zero: both would hide mistakes)."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "LayerNorm" in name or "norm" in name.split(".")[-2]:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.4 * torch.randn_like(p))


def save_npy(name, a):
    np.save(os.path.join(OUT, name), np.ascontiguousarray(a.detach().numpy() if torch.is_tensor(a) else a))


# ---------------------------------------------------------------- inputs
B, R = 4, 5
nregions = [5, 3, 4, 1]
feats = torch.randn(B, R, FEAT)
xy = torch.rand(B, R, 2) * 0.5
boxes = torch.cat([xy, xy + 0.1 + torch.rand(B, R, 2) * 0.4], 2)
for i, n in enumerate(nregions):
    feats[i, n:] = 0
    boxes[i, n:] = 0
ids, lens = token_ids(CAPTIONS)
save_npy("feats.npy", feats.float())
save_npy("boxes.npy", boxes.float())
save_npy("nregions.npy", np.array(nregions, dtype=np.int64))
save_npy("ids.npy", ids.numpy())
with open(os.path.join(OUT, "captions.txt"), "w") as f:
    f.write("\n".join(CAPTIONS) + "\n")

# The official batches reserve slot 0: a zero feature row with a zero box.
slot_feats = torch.cat([torch.zeros(B, 1, FEAT), feats], 1)
slot_boxes = torch.cat([torch.zeros(B, 1, 4), boxes], 1)
slot_lens = [n + 1 for n in nregions]
slot_valid = valid_mask(slot_lens, R + 1)
txt_valid = valid_mask(lens, ids.shape[1])


def config(name, shared):
    return {
        "dataset": {"name": "coco", "data": "data", "restval": True, "pre-extracted-features": False},
        "text-model": {"name": "bert", "pretrain": "bert-base-uncased", "word-dim": WORD, "extraction-hidden-layer": BERT_LAYERS,
                       "fine-tune": True, "pre-extracted": False, "layers": 0, "dropout": 0.1},
        "image-model": {"name": "bottomup", "pre-extracted-features-root": "data/coco/features_36", "transformer-layers": IMG_LAYERS,
                        "dropout": 0.1, "pos-encoding": "concat-and-process", "crop-size": 224, "fine-tune": False,
                        "feat-dim": FEAT, "norm": True},
        "model": {"name": name, "embed-size": EMBED, "text-aggregation": "first", "image-aggregation": "first",
                  "layers": JOINT_LAYERS, "exclude-stopwords": False, "shared-transformer": shared, "dropout": 0.1},
        "training": {"lr": 1e-5, "grad-clip": 2.0, "max-violation": True, "loss-type": "alignment" if name == "teran" else "matching",
                     "alignment-mode": "MrSw", "measure": "dot", "margin": 0.2, "bs": 40, "scheduler": "steplr",
                     "gamma": 0.1, "step-size": 20, "warmup": None, "warmup-period": 1000},
    }


def checkpoint(model, name, shared, forward_loss):
    """One Adam step (so that the optimiser state holds tensors), then the
    dict the official train.py saves."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-5)
    sched = torch.optim.lr_scheduler.StepLR(opt, 20, gamma=0.1)
    opt.zero_grad()
    forward_loss().backward()
    opt.step()
    sched.step()
    return {
        "epoch": 7,
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "opt": argparse.Namespace(num_epochs=30, lr_update=15, workers=10, log_step=10, val_step=500, test_step=100000000,
                                  logger_name="runs/" + name, resume="", load_model="", use_restval=False,
                                  reinitialize_scheduler=False, config="configs/%s_coco.yaml" % name),
        "config": config(name, shared),
        "Eiters": 1234,
    }


def real_vectors(x, counts, first):
    """The vectors of x (N, L, E) at positions first..first+count-1 of each item."""
    return torch.cat([x[i, first:first + n] for i, n in enumerate(counts)], 0)


word_counts = [n - 2 for n in lens]  # tokens between [CLS] and [SEP]

# ---------------------------------------------------------------- TERAN
teran = teran_model(shared=False)
randomise(teran)
teran.eval()


def teran_scores():
    regions = teran.img_txt_enc.forward_img(slot_feats, slot_boxes, slot_valid)  # (B, 1+R, E)
    words = teran.img_txt_enc.forward_txt(ids, txt_valid)                          # (C, T, E)
    s = torch.zeros(B, len(CAPTIONS))
    for i in range(B):
        for c in range(len(CAPTIONS)):
            a = regions[i, 1:slot_lens[i]] @ words[c, 1:lens[c] - 1].t()  # (regions, words)
            s[i, c] = a.max(0)[0].sum()  # MrSw: best region per word, summed over words
    return regions, words, s


teran.train()  # the step runs in training mode, as the official loop does
ck = checkpoint(teran, "teran", False, lambda: hinge(teran_scores()[2]))
teran.eval()
regions, words, scores = teran_scores()
save_npy("teran_regions.npy", real_vectors(regions, nregions, 1))
save_npy("teran_words.npy", real_vectors(words, word_counts, 1))
save_npy("teran_scores.npy", scores)
save_npy("teran_loss.npy", hinge(scores).reshape(1))
torch.save(ck, os.path.join(OUT, "teran.pth"))
torch.save(ck, os.path.join(OUT, "teran_legacy.pth"), _use_new_zipfile_serialization=False)

# ---------------------------------------------------------------- TERN
tern = teran_model(shared=True)
randomise(tern)


def tern_scores():
    regions = tern.img_txt_enc.forward_img(slot_feats, slot_boxes, slot_valid)
    words = tern.img_txt_enc.forward_txt(ids, txt_valid)
    icls, tcls = regions[:, 0], words[:, 0]  # image-aggregation and text-aggregation "first"
    return regions, words, icls @ tcls.t()


tern.train()
ck_tern = checkpoint(tern, "tern", True, lambda: hinge(tern_scores()[2]))
tern.eval()
regions, words, scores = tern_scores()
save_npy("tern_regions.npy", real_vectors(regions, nregions, 1))
save_npy("tern_words.npy", real_vectors(words, word_counts, 1))
save_npy("tern_scores.npy", scores)
save_npy("tern_loss.npy", hinge(scores).reshape(1))
torch.save(ck_tern, os.path.join(OUT, "tern.pth"))

for path, ck_ in (("teran.pth", ck), ("teran_legacy.pth", ck), ("tern.pth", ck_tern)):
    back = torch.load(os.path.join(OUT, path))
    assert all(torch.equal(back["model"][k], v) for k, v in ck_["model"].items()), path

# ---------------------------------------------------------------- a HuggingFace BERT directory
bert = BertModel(len(VOCAB), WORD, BERT_ALL_LAYERS, BERT_HEADS, BERT_FF, POSITIONS, pooler=True)
randomise(bert)
bert.eval()
hidden = bert(ids, txt_valid)
save_npy("bert_hidden.npy", torch.cat([hidden[i, :n] for i, n in enumerate(lens)], 0))

bert_cfg = {"architectures": ["BertModel"], "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
            "hidden_size": WORD, "initializer_range": 0.02, "intermediate_size": BERT_FF, "layer_norm_eps": 1e-12,
            "max_position_embeddings": POSITIONS, "model_type": "bert", "num_attention_heads": BERT_HEADS,
            "num_hidden_layers": BERT_ALL_LAYERS, "pad_token_id": 0, "type_vocab_size": 2, "vocab_size": len(VOCAB)}
for d in ("bert", "bert_bin"):
    os.makedirs(os.path.join(OUT, d), exist_ok=True)
    with open(os.path.join(OUT, d, "config.json"), "w") as f:
        json.dump(bert_cfg, f, indent=2)
    with open(os.path.join(OUT, d, "vocab.txt"), "w") as f:
        f.write("\n".join(VOCAB) + "\n")



sd = bert.state_dict()
write_safetensors(os.path.join(OUT, "bert", "model.safetensors"), {k: v for k, v in sd.items() if k != "embeddings.position_ids"})
old = collections.OrderedDict()
for k, v in sd.items():
    old["bert." + k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")] = v
old["cls.predictions.bias"] = torch.zeros(len(VOCAB))
torch.save(old, os.path.join(OUT, "bert_bin", "pytorch_model.bin"), _use_new_zipfile_serialization=False)
print("wrote", OUT)
