"""TERAN and TERN in PyTorch, as the official code (mesnico/TERAN,
mesnico/TERN) lays them out: the same module names, so the same state_dict
names as the official checkpoints -- img_txt_enc.{txt_enc.bert_model,
img_enc, img_proj, cap_proj, transformer_encoder_1, transformer_encoder_2},
HuggingFace's BERT names, sequence-first torch.nn.TransformerEncoder post-norm
layers. Written from the papers and the reference facts, not copied.

The modules that tools/import_reference.py (the import test's checkpoints,
at toy sizes) and tools/peer_trainstep.py (the PyTorch peer of `xmr bench
train-step`, at the sizes Go passes) both build. Every size is a parameter;
so are what the two differ in, each off by default where the other needs it
absent:
  - the official modules that take no part in the loss (BERT's pooler, the
    image encoder's fc, the text encoder's map), which the checkpoints hold
    and the peer leaves out, as xmr has none;
  - BERT's dropout (None: no dropout module at all, as in the checkpoints,
    whose state_dict metadata lists every module);
  - the image encoder's slot 0 (ImageEncoder's slot0).

Masks are `valid`, bool, True at a real token or image slot.

tools.WriteScript writes this module beside every Python script.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def key_padding(valid):
    """True at padding, as key_padding_mask wants it."""
    return ~valid


def optional_dropout(p):
    """nn.Dropout(p), or None (no module) for p None."""
    return None if p is None else nn.Dropout(p)


def dropped(dropout, x):
    """x through dropout, an nn.Dropout or None."""
    return x if dropout is None else dropout(x)


# ---------------------------------------------------------------- BERT
# HuggingFace's BertModel, its module names kept: post-norm layers, erf GELU,
# dropout (when given) on the embeddings, the attention probabilities and
# both outputs.

class BertEmbeddings(nn.Module):
    def __init__(self, vocab, d, positions, dropout=None):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, d)
        self.position_embeddings = nn.Embedding(positions, d)
        self.token_type_embeddings = nn.Embedding(2, d)
        self.LayerNorm = nn.LayerNorm(d, eps=1e-12)
        self.dropout = optional_dropout(dropout)
        self.register_buffer("position_ids", torch.arange(positions).expand((1, -1)))

    def forward(self, ids):
        pos = self.position_ids[:, :ids.shape[1]]
        x = self.word_embeddings(ids) + self.position_embeddings(pos) + self.token_type_embeddings(torch.zeros_like(ids))
        return dropped(self.dropout, self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, d, heads, dropout=None):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.dropout = optional_dropout(dropout)

    def forward(self, x, ext_mask):
        b, t, d = x.shape
        hd = d // self.heads

        def split(y):
            return y.view(b, t, self.heads, hd).transpose(1, 2)  # (B, h, T, hd)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        att = dropped(self.dropout, torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd) + ext_mask, dim=-1))
        return (att @ v).transpose(1, 2).reshape(b, t, d)


class BertSelfOutput(nn.Module):
    def __init__(self, d, dropout=None, d_in=None):
        super().__init__()
        self.dense = nn.Linear(d if d_in is None else d_in, d)
        self.LayerNorm = nn.LayerNorm(d, eps=1e-12)
        self.dropout = optional_dropout(dropout)

    def forward(self, h, x):
        return self.LayerNorm(dropped(self.dropout, self.dense(h)) + x)


class BertAttention(nn.Module):
    def __init__(self, d, heads, dropout=None):
        super().__init__()
        self.self, self.output = BertSelfAttention(d, heads, dropout), BertSelfOutput(d, dropout)

    def forward(self, x, ext_mask):
        return self.output(self.self(x, ext_mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.dense = nn.Linear(d, ff)

    def forward(self, x):
        return F.gelu(self.dense(x))


class BertOutput(BertSelfOutput):
    """BertSelfOutput's three modules, from the feed-forward width."""

    def __init__(self, ff, d, dropout=None):
        super().__init__(d, dropout, d_in=ff)


class BertLayer(nn.Module):
    def __init__(self, d, heads, ff, dropout=None):
        super().__init__()
        self.attention, self.intermediate, self.output = BertAttention(d, heads, dropout), BertIntermediate(d, ff), BertOutput(ff, d, dropout)

    def forward(self, x, ext_mask):
        h = self.attention(x, ext_mask)
        return self.output(self.intermediate(h), h)


class BertEncoder(nn.Module):
    def __init__(self, layers, d, heads, ff, dropout=None):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(d, heads, ff, dropout) for _ in range(layers)])


class BertPooler(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.dense = nn.Linear(d, d)


class BertModel(nn.Module):
    """BERT of layers layers of width d over a vocabulary of vocab word
    pieces; pooler: with HuggingFace's pooler (unused here)."""

    def __init__(self, vocab, d, layers, heads, ff, positions, dropout=None, pooler=False):
        super().__init__()
        self.embeddings, self.encoder = BertEmbeddings(vocab, d, positions, dropout), BertEncoder(layers, d, heads, ff, dropout)
        if pooler:
            self.pooler = BertPooler(d)

    def forward(self, ids, valid):  # (C, T) word pieces, (C, T) bool
        ext = (1.0 - valid.float())[:, None, None, :] * -10000.0  # HuggingFace's extended attention mask
        x = self.embeddings(ids)
        for layer in self.encoder.layer:
            x = layer(x, ext)
        return x  # the last hidden state (C, T, W)


# ---------------------------------------------------------------- TERAN / TERN
# The official module tree: img_txt_enc.{img_enc, txt_enc, img_proj,
# cap_proj, transformer_encoder_1, transformer_encoder_2}.

def encoder(d, heads, ff, layers, dropout):
    """The official transformer encoders: post-norm, ReLU, sequence-first."""
    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout, activation="relu")
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


class PositionalEncodingImageBoxes(nn.Module):  # mode concat-and-process
    def __init__(self, feat, hidden):
        super().__init__()
        self.map = nn.Sequential(nn.Linear(feat + 5, hidden), nn.ReLU(), nn.Linear(hidden, hidden))

    def forward(self, x, boxes):
        """x (B, S, F) and boxes (B, S, 4), batch-first."""
        area = ((boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])).unsqueeze(-1)
        return self.map(torch.cat([x, boxes, area], -1))


class ImageEncoder(nn.Module):  # the official visual.TransformerPostProcessing
    """The transformer over the regions, of width hidden, after the box MLP
    (pos_encoding) from the features of width feat (without it, feat must be
    hidden). fc: the width of the official fc (unused by the joint model),
    None to leave it out.

    slot0 None is the official module: the batches hold slot 0 already (a
    zero region). "zero-region" or "zero" is xmr's model.ImageConfig.Slot0:
    the module fills slot 0 itself, with a zero region before the box MLP or
    zeros after it."""

    def __init__(self, feat, hidden, heads, ff, layers, dropout, pos_encoding=True, slot0=None, fc=None):
        super().__init__()
        self.dim, self.slot0 = hidden, slot0
        self.transformer_encoder = encoder(hidden, heads, ff, layers, dropout)
        self.pos_encoding_image = PositionalEncodingImageBoxes(feat, hidden) if pos_encoding else None
        if fc is not None:
            self.fc = nn.Linear(hidden, fc)  # in the state dict, unused by the joint model

    def forward(self, feats, boxes, valid):  # (B, S, F), (B, S, 4), (B, 1+R) bool; S = 1+R for slot0 None, R otherwise
        b = feats.shape[0]
        if self.slot0 == "zero-region":  # as the official batches: a zero region in slot 0
            feats = torch.cat([feats.new_zeros(b, 1, feats.shape[2]), feats], 1)
            boxes = torch.cat([boxes.new_zeros(b, 1, 4), boxes], 1)
        x = self.pos_encoding_image(feats, boxes) if self.pos_encoding_image is not None else feats
        if self.slot0 == "zero":  # xmr's default: zeros after the box MLP
            x = torch.cat([x.new_zeros(b, 1, x.shape[2]), x], 1)
        x = self.transformer_encoder(x.permute(1, 0, 2), src_key_padding_mask=key_padding(valid))
        return x.permute(1, 0, 2)  # (B, 1+R, H)


class TextEncoder(nn.Module):  # the official text.EncoderTextBERT
    """bert_model's last hidden state. embed: the width of the official map
    (unused by the joint model), None to leave it out."""

    def __init__(self, bert_model, embed=None):
        super().__init__()
        self.bert_model = bert_model
        self.word_embeddings = bert_model.embeddings.word_embeddings  # saved twice, as in the official code
        self.dim = self.word_embeddings.embedding_dim
        if embed is not None:
            self.map = nn.Linear(self.dim, embed)  # in the state dict, unused by the joint model

    def forward(self, ids, valid):
        return self.bert_model(ids, valid)


class Joint(nn.Module):  # the official teran.JointTextImageTransformerEncoder
    """The projections and the final transformer layers over txt_enc and
    img_enc; shared: one transformer_encoder_1 for both (TERN), else
    transformer_encoder_2 for the images. Build txt_enc before img_enc, as
    the official module does."""

    def __init__(self, txt_enc, img_enc, embed, heads, ff, layers, dropout, shared):
        super().__init__()
        self.txt_enc, self.img_enc = txt_enc, img_enc
        self.img_proj, self.cap_proj = nn.Linear(img_enc.dim, embed), nn.Linear(txt_enc.dim, embed)
        self.shared = shared
        self.transformer_encoder_1 = encoder(embed, heads, ff, layers, dropout)
        if not shared:
            self.transformer_encoder_2 = encoder(embed, heads, ff, layers, dropout)

    def forward_txt(self, ids, valid):
        c = self.cap_proj(self.txt_enc(ids, valid))
        x = self.transformer_encoder_1(c.permute(1, 0, 2), src_key_padding_mask=key_padding(valid))
        return F.normalize(x.permute(1, 0, 2), p=2, dim=2)  # (C, T, E)

    def forward_img(self, feats, boxes, valid):
        i = self.img_proj(self.img_enc(feats, boxes, valid))
        te = self.transformer_encoder_1 if self.shared else self.transformer_encoder_2
        x = te(i.permute(1, 0, 2), src_key_padding_mask=key_padding(valid))
        return F.normalize(x.permute(1, 0, 2), p=2, dim=2)  # (B, 1+R, E)


class Model(nn.Module):
    def __init__(self, joint):
        super().__init__()
        self.img_txt_enc = joint


def hinge(scores, margin=0.2, max_violation=True):
    """VSE++ hinge loss (scores: images x captions): the hardest negative of
    each direction, or the sum over negatives."""
    d = scores.diag().view(-1, 1)
    eye = torch.eye(scores.shape[0], dtype=torch.bool)
    cost_c = (margin + scores - d).clamp(min=0).masked_fill(eye, 0)
    cost_i = (margin + scores - d.t()).clamp(min=0).masked_fill(eye, 0)
    if max_violation:
        return cost_c.max(1)[0].sum() + cost_i.max(0)[0].sum()
    return cost_c.sum() + cost_i.sum()
