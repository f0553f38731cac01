"""tfevents_read.py: a reader of TensorBoard event files written independently of
src/train/tfevents.c (TFRecord framing with both masked CRC-32C checked, the Event and
Summary protobufs decoded by hand), shared by test_tensorboard.py and test_olmes_inloop.py."""
import struct


# CRC-32C (Castagnoli, reflected 0x82F63B78), bitwise, and TFRecord's mask
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


def masked(b):
    c = crc32c(b)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(b, i):
    v = s = 0
    while True:
        x = b[i]; i += 1
        v |= (x & 0x7F) << s; s += 7
        if not x & 0x80:
            return v, i


def fields(b):
    i, out = 0, []
    while i < len(b):
        k, i = varint(b, i)
        f, w = k >> 3, k & 7
        if w == 0:
            v, i = varint(b, i)
        elif w == 1:
            v = b[i:i + 8]; i += 8
        elif w == 5:
            v = b[i:i + 4]; i += 4
        elif w == 2:
            n, i = varint(b, i); v = b[i:i + n]; i += n
        else:
            raise ValueError(f"wire type {w}")
        out.append((f, w, v))
    return out


def read_events(path):
    data, i, ev = open(path, "rb").read(), 0, []
    while i < len(data):
        hdr = data[i:i + 8]
        (n,) = struct.unpack("<Q", hdr)
        (lc,) = struct.unpack("<I", data[i + 8:i + 12])
        body = data[i + 12:i + 12 + n]
        (dc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        assert lc == masked(hdr), f"{path}@{i}: length CRC"
        assert dc == masked(body), f"{path}@{i}: data CRC"
        i += 16 + n
        e = {"scalars": []}
        for f, w, v in fields(body):
            if f == 1: e["wall_time"] = struct.unpack("<d", v)[0]
            elif f == 2: e["step"] = v
            elif f == 3: e["file_version"] = v.decode()
            elif f == 5:
                for sf, sw, sv in fields(v):
                    assert sf == 1 and sw == 2
                    val = dict((ff, vv) for ff, ww, vv in fields(sv))
                    e["scalars"].append((val[1].decode(), struct.unpack("<f", val[2])[0]))
        ev.append(e)
    return ev


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]
