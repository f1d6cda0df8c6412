"""Helpers shared by the Python scripts: the peers of `xmr bench` and the
tools that write checkpoints (tools.WriteScript writes this module beside
every script)."""
import json
import os
import resource
import struct


def peak_rss_mib():
    """This process's own peak resident set in MiB: VmHWM where /proc has it.
    getrusage's ru_maxrss would report the Go parent's peak when that is
    larger: Linux keeps a forked child's high-water mark across exec."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_safetensors(path, tensors):
    """Writes tensors (name -> torch tensor) as float32 in the safetensors
    format: an 8-byte little-endian header length, the JSON header (padded
    with spaces to a multiple of 8), the raw data. Atomically: a temporary
    file, fsynced, then renamed over path."""
    header, chunks, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        b = t.detach().float().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        chunks.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
