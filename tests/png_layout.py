#!/usr/bin/env python3
"""png_layout.py: what a screenshot of `olmo report` shows, for tests/test_report.sh and
tests/test_report_render.sh (the one PNG decoder of the tests).

Reads a PNG (8-bit RGB or RGBA, not interlaced: what headless Chromium writes) with the
standard library only, and prints one JSON object:
  width, height;
  rows_by_columns: {k: number of pixel rows crossed by exactly k white runs at least
      --min-run pixels wide} (the report's charts are white boxes on a #fafafa page: a row
      through a row of charts crosses one white run per column);
  colored: pixels of the series palette's first three colors (curves drawn at all);
  palette: {"#rrggbb": pixels} for those three colors;
  distinct: the number of distinct colors (a blank page has a handful);
  bar_rows: pixel rows holding a run of at least 40 pixels of one palette color (the
      downstream chart's bars; curves are 1.6 pixels wide and never that flat);
  alarm_red: pixels of #bb0000, the color of an alarm that fired (the alarms panel).
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
    by_cols, bar_rows, red = {}, 0, 0
    palette = {(0x1f, 0x77, 0xb4): 0, (0xd6, 0x27, 0x28): 0, (0x2c, 0xa0, 0x2c): 0}
    distinct = set()
    for line in rows:
        runs, run, prun, prev, bar = 0, 0, 0, None, False
        for x in range(w):
            px = tuple(line[x * bpp:x * bpp + 3])
            distinct.add(px)
            if px == (255, 255, 255):
                run += 1
            else:
                if run >= min_run: runs += 1
                run = 0
            if px in palette:
                palette[px] += 1
                prun = prun + 1 if px == prev else 1
                bar |= prun >= 40
            else:
                prun = 0
                red += px == (0xbb, 0, 0)
            prev = px
        if run >= min_run: runs += 1
        by_cols[runs] = by_cols.get(runs, 0) + 1
        bar_rows += bar
    print(json.dumps({"width": w, "height": h, "rows_by_columns": by_cols, "colored": sum(palette.values()),
                      "palette": {"#%02x%02x%02x" % c: n for c, n in palette.items()}, "distinct": len(distinct),
                      "bar_rows": bar_rows, "alarm_red": red}))


if __name__ == "__main__":
    main()
