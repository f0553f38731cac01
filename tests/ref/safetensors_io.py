"""Minimal safetensors reader/writer using numpy only.

File layout (https://github.com/huggingface/safetensors):
  8 bytes   little-endian uint64 N = length of the JSON header
  N bytes   JSON: {name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...}
            plus an optional "__metadata__": {str: str}; offsets are relative to the
            first byte after the header; the header may be padded with spaces.
  rest      raw little-endian tensor data.

BF16 has no numpy dtype: read() widens it to float32 exactly (bits << 16) unless
raw_bf16=True (then a uint16 array of the raw bits). write() stores a tensor as BF16 when
dtypes={name: "BF16"} says so (round-to-nearest-even from float32) or when given a uint16
array with that override.
"""
import json
import struct

import numpy as np

_NP = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"), "BF16": np.dtype("<u2"),
}
_FROM_NP = {
    np.dtype("float64"): "F64", np.dtype("float32"): "F32", np.dtype("float16"): "F16",
    np.dtype("int64"): "I64", np.dtype("int32"): "I32", np.dtype("int16"): "I16", np.dtype("int8"): "I8",
    np.dtype("uint64"): "U64", np.dtype("uint32"): "U32", np.dtype("uint16"): "U16", np.dtype("uint8"): "U8",
    np.dtype("bool"): "BOOL",
}


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """Round-to-nearest-even float32 -> bf16 bit pattern (NaN kept as quiet NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    out[nan] = 0x7FC0
    return out


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n).decode("utf-8"))
    return hdr, 8 + n


def read(path, raw_bf16=False, with_metadata=False):
    """Returns {name: np.ndarray} (and the metadata dict if with_metadata)."""
    hdr, base = read_header(path)
    meta = hdr.pop("__metadata__", None) or {}
    with open(path, "rb") as f:
        buf = f.read()
    out = {}
    for name, info in hdr.items():
        dt = info["dtype"]
        if dt not in _NP:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        npdt = _NP[dt]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if e - b != count * npdt.itemsize:
            raise ValueError(f"{path}: tensor {name}: {e - b} bytes for shape {shape} {dt}")
        if base + e > len(buf):
            raise ValueError(f"{path}: tensor {name}: data past end of file")
        a = np.frombuffer(buf, dtype=npdt, count=count, offset=base + b).reshape(shape).copy()
        if dt == "BF16" and not raw_bf16:
            a = bf16_bits_to_f32(a).reshape(shape)
        out[name] = a
    return (out, meta) if with_metadata else out


def write(path, tensors, metadata=None, dtypes=None):
    """tensors: {name: array-like}; dtypes: optional {name: safetensors dtype} override."""
    dtypes = dtypes or {}
    hdr = {}
    blobs = []
    off = 0
    for name in tensors:  # insertion order kept
        a = np.asarray(tensors[name])
        dt = dtypes.get(name)
        if dt == "BF16":
            data = a if a.dtype == np.uint16 else f32_to_bf16_bits(a)
            data = np.ascontiguousarray(data, dtype="<u2")
        else:
            if dt is None:
                if a.dtype not in _FROM_NP:
                    raise ValueError(f"tensor {name}: unsupported numpy dtype {a.dtype}")
                dt = _FROM_NP[a.dtype]
            data = np.ascontiguousarray(a, dtype=_NP[dt])
        raw = data.tobytes()
        hdr[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        hdr["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(hdr, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)  # align data to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)


if __name__ == "__main__":  # tiny round-trip self-test
    import os
    import tempfile
    rng = np.random.default_rng(0)
    t = {
        "a": rng.standard_normal((3, 4)).astype(np.float32),
        "b": rng.standard_normal(5),
        "c": rng.integers(-5, 5, (2, 2)).astype(np.int32),
        "d": rng.integers(0, 9, 7).astype(np.int64),
        "e": rng.integers(0, 9, 3).astype(np.uint32),
        "f": np.array([1.0, -2.5, 3.140625, 1e-3], dtype=np.float32),
        "s": np.float32(2.0).reshape(()),
    }
    p = os.path.join(tempfile.mkdtemp(), "x.safetensors")
    write(p, t, metadata={"format": "pt"}, dtypes={"f": "BF16"})
    r, m = read(p, with_metadata=True)
    assert m == {"format": "pt"}
    for k in t:
        want = t[k] if k != "f" else bf16_bits_to_f32(f32_to_bf16_bits(t[k]))
        assert r[k].shape == np.asarray(t[k]).shape and np.array_equal(r[k], want), k
    assert read(p)["f"][0] == 1.0 and read(p)["f"][2] == 3.140625
    print("safetensors_io selftest ok")
