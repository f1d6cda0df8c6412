"""Writes the fixtures of torchfile's tests (run with Debian's python3-torch):

    /usr/bin/python3 torchfile/testdata/gen.py torchfile/testdata

- zip2.pth, zip4.pth: one checkpoint-like object, torch.save in the zip
  format with pickle protocols 2 (torch's default) and 4;
- legacy.pth: the same object with _use_new_zipfile_serialization=False;
- tar.pth: its tensors in torch's first (tar) format, written here by hand
  and read back with torch.load to prove it is that format;
- plain_pN.pkl (N = 0..5): plain values pickled by Python's pickle with
  protocol N, for the text opcodes of protocol 0 and the framing of 4 and 5;
- expected.json: what each file must read as (tensors flattened
  row-major, with shape and dtype).
"""
import argparse
import collections
import io
import json
import os
import pickle
import struct
import sys
import tarfile

import numpy as np
import torch

out = sys.argv[1]
torch.manual_seed(0)

base = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 8
sd = collections.OrderedDict()
sd["w"] = base                                   # contiguous
sd["w_t"] = base.t()                             # transposed view of the same storage
sd["w_row"] = base[1]                            # offset view
sd["w_col"] = base[:, 2]                         # strided view
sd["pos"] = torch.arange(5).expand((1, -1))      # int64, expanded
sd["half"] = torch.tensor([1.0, -2.5, 65504.0, 6e-8], dtype=torch.float16)
sd["bf16"] = torch.tensor([1.0, -3.0, 0.15625], dtype=torch.bfloat16)
sd["f64"] = torch.tensor([[1.5, -1e-3], [3e38, 0.1]], dtype=torch.float64)
sd["scalar"] = torch.tensor(2.5)
sd["empty"] = torch.zeros(0, 3)
sd["param"] = torch.nn.Parameter(torch.tensor([0.5, 0.25]))
sd["mask"] = torch.tensor([True, False, True])
sd["i32"] = torch.tensor([-7, 9], dtype=torch.int32)

opt = argparse.Namespace(lr=1e-5, name="run", resume="", flag=True, none=None, ids=[1, 2, 3])
obj = {
    "epoch": 3,
    "model": sd,
    "opt": opt,
    "config": {"model": {"name": "teran", "embed-size": 1024, "shared": False}, "training": {"margin": 0.2, "warmup": None}},
    "bytes": b"\x00\xffab",
    "big": 2 ** 70,
    "neg": -(2 ** 40),
    "np": np.float64(0.75),
    "npint": np.int64(-4),
    "tuplekey": {(1, "a"): "x"},
    "set": {7},
    "shared": [sd["w"], sd["w"]],
}


def tensor_json(t):
    t = t.detach()
    vals = [int(v) for v in t.flatten().tolist()]
    if t.dtype.is_floating_point:
        vals = [float(v) for v in t.float().flatten().tolist()]
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "values": vals}


expected = {name: tensor_json(t) for name, t in sd.items()}
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)

torch.save(obj, os.path.join(out, "zip2.pth"))
torch.save(obj, os.path.join(out, "zip4.pth"), pickle_protocol=4)
torch.save(obj, os.path.join(out, "legacy.pth"), _use_new_zipfile_serialization=False)
for p in ("zip2.pth", "zip4.pth", "legacy.pth"):
    back = torch.load(os.path.join(out, p))
    for k in sd:
        assert torch.equal(back["model"][k], sd[k]), (p, k)


def write_tar(path, tensors):
    """torch's tar format: storages, tensors and pickle entries."""
    storages, records, keys = [], [], {}
    for t in tensors.values():
        st = t.storage()
        if st.data_ptr() not in keys:
            keys[st.data_ptr()] = len(keys)
            storages.append((keys[st.data_ptr()], st))
    sbuf = io.BytesIO()
    pickle.dump(len(storages), sbuf, protocol=2)
    for key, st in storages:
        pickle.dump((key, "cpu", getattr(torch, st.pickle_storage_type())), sbuf, protocol=2)
        sbuf.write(struct.pack("<q", st.size()))
        sbuf.write(bytes(st.untyped().tolist()))
    pickle.dump([], sbuf, protocol=2)
    tbuf = io.BytesIO()
    pickle.dump(len(tensors), tbuf, protocol=2)
    tkeys = {}
    for i, (name, t) in enumerate(tensors.items()):
        key = 100 + i
        tkeys[name] = key
        tensor_type = getattr(torch, t.type().split(".")[-1])  # torch.FloatTensor, ...
        pickle.dump((key, keys[t.storage().data_ptr()], tensor_type), tbuf, protocol=2)
        tbuf.write(struct.pack("<i", t.dim()) + b"\0\0\0\0")
        tbuf.write(struct.pack(f"<{t.dim()}q", *t.shape))
        tbuf.write(struct.pack(f"<{t.dim()}q", *t.stride()))
        tbuf.write(struct.pack("<q", t.storage_offset()))

    class P(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, torch.Tensor):
                return str(tkeys[next(n for n, t in tensors.items() if t is o)])
            return None

    pbuf = io.BytesIO()
    P(pbuf, protocol=2).dump(collections.OrderedDict(tensors))
    info = {"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 8}}
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, b in (("sys_info", pickle.dumps(info, protocol=2)), ("pickle", pbuf.getvalue()),
                        ("storages", sbuf.getvalue()), ("tensors", tbuf.getvalue())):
            ti = tarfile.TarInfo(name)
            ti.size = len(b)
            tar.addfile(ti, io.BytesIO(b))


tar_tensors = collections.OrderedDict((k, sd[k]) for k in ("w", "w_t", "w_row", "w_col", "half", "f64"))
write_tar(os.path.join(out, "tar.pth"), tar_tensors)
back = torch.load(os.path.join(out, "tar.pth"))
for k, t in tar_tensors.items():
    assert torch.equal(back[k], t), k

plain = {"i": 7, "neg": -300, "big": 2 ** 70, "f": 0.1, "s": "héllo\n'\"\\", "b": b"\x00\x01\xff", "l": [1, [2, 3], ()],
         "t": (None, True, False), "nested": {"k": {"x": 1.5e300}}, 3: "int key"}
for proto in range(6):
    with open(os.path.join(out, f"plain_p{proto}.pkl"), "wb") as f:
        pickle.dump(plain, f, protocol=proto)
print("fixtures written to", out)
