#!/usr/bin/env python3
"""png_layout.py: what a screenshot of `olmo report` shows, for tests/test_report_render.sh.

Reads a PNG (8-bit RGB or RGBA, not interlaced: what headless Chromium writes) with the
standard library only, and prints one JSON object:
  width, height;
  rows_by_columns: {k: number of pixel rows crossed by exactly k white runs at least
      --min-run pixels wide} (the report's charts are white boxes on a #fafafa page: a row
      through a row of charts crosses one white run per column);
  colored: pixels of the series palette's first colors (curves drawn at all).
"""
import json
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def main():
    path, min_run = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 300
    w, h, bpp, rows = read_png(path)
    by_cols, colored = {}, 0
    palette = {(0x1f, 0x77, 0xb4), (0xd6, 0x27, 0x28), (0x2c, 0xa0, 0x2c)}
    for line in rows:
        runs, run = 0, 0
        for x in range(w):
            px = tuple(line[x * bpp:x * bpp + 3])
            if px == (255, 255, 255):
                run += 1
            else:
                if run >= min_run: runs += 1
                run = 0
                if px in palette: colored += 1
        if run >= min_run: runs += 1
        by_cols[runs] = by_cols.get(runs, 0) + 1
    print(json.dumps({"width": w, "height": h, "rows_by_columns": by_cols, "colored": colored}))


if __name__ == "__main__":
    main()
