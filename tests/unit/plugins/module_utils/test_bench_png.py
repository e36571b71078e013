"""The chart's PNG canvas (plugins/module_utils/_bench_png.py): drawing, clipping, glyphs and the decoder's refusals.
The image itself is checked against an independent decoder in test_bench_report.py."""
import struct
import zlib

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_png as png

RED, WHITE = (255, 0, 0), (255, 255, 255)


def pixels(canvas):
    return [[tuple(row[3 * x:3 * x + 3]) for x in range(canvas.width)] for row in canvas.rows]


def test_rect_fills_inclusive_corners_in_any_order_and_clips():
    cv = png.Canvas(4, 3)
    cv.rect(2.6, 1.4, 1, 0, RED)  # rounded to (3, 1)..(1, 0), either order
    assert pixels(cv) == [[WHITE, RED, RED, RED], [WHITE, RED, RED, RED], [WHITE] * 4]
    cv = png.Canvas(3, 2, background=(0, 0, 0))
    cv.rect(-5, -5, 10, 10, RED)  # clipped to the canvas, never wrapping into the next row
    assert pixels(cv) == [[RED] * 3, [RED] * 3] and all(len(r) == 9 for r in cv.rows)
    cv = png.Canvas(3, 2)
    cv.rect(5, 0, 7, 1, RED)  # wholly outside
    cv.rect(0, 5, 2, 9, RED)
    assert pixels(cv) == [[WHITE] * 3, [WHITE] * 3]


def test_lines_have_their_width():
    cv = png.Canvas(4, 4)
    cv.hline(0, 3, 1, RED, width=2)
    assert pixels(cv)[1:3] == [[RED] * 4, [RED] * 4] and pixels(cv)[0] == [WHITE] * 4 and pixels(cv)[3] == [WHITE] * 4
    cv = png.Canvas(3, 2)
    cv.vline(1, 0, 1, RED)
    assert pixels(cv) == [[WHITE, RED, WHITE], [WHITE, RED, WHITE]]


def test_text_draws_glyphs_upper_cased_and_unknown_as_question_mark():
    cv = png.Canvas(12, 7)
    assert cv.text(0, 0, "i~", RED) == 12 == png.text_width("i~")
    drawn = [["1" if p == RED else "0" for p in row] for row in pixels(cv)]
    assert ["".join(r[0:5]) for r in drawn] == png._FONT["I"].split()
    assert ["".join(r[6:11]) for r in drawn] == png._FONT["?"].split()
    assert all(r[5] == "0" and r[11] == "0" for r in drawn)  # one column of spacing
    big = png.Canvas(12, 14)
    assert big.text(0, 0, "-", RED, scale=2) == 12 == png.text_width("-", scale=2)
    assert pixels(big)[6][0:10] == [RED] * 10 and pixels(big)[5][0] == WHITE and pixels(big)[8][0] == WHITE


def test_png_is_what_the_decoder_reads_back():
    cv = png.Canvas(5, 2)
    cv.rect(1, 1, 3, 1, (1, 2, 3))
    width, height, rows = png.decode_png(cv.png())
    assert (width, height, rows) == (5, 2, [bytes(r) for r in cv.rows])
    data = cv.png()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and data.endswith(png._chunk(b"IEND", b""))


def chunks(ihdr=None, idat=None, extra=()):
    ihdr = ihdr if ihdr is not None else struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = idat if idat is not None else zlib.compress(b"\x00\x01\x02\x03")
    return (b"\x89PNG\r\n\x1a\n" + png._chunk(b"IHDR", ihdr) + b"".join(extra) + png._chunk(b"IDAT", idat)
            + png._chunk(b"IEND", b""))


@pytest.mark.parametrize("data, message", [
    (b"GIF89a", "not a PNG signature"),
    (b"\x89PNG\r\n\x1a\n" + png._chunk(b"IEND", b""), "PNG must start with IHDR and end with IEND"),
    (b"\x89PNG\r\n\x1a\n", "PNG must start with IHDR and end with IEND"),
    (chunks()[:-12], "PNG must start with IHDR and end with IEND"),
    (chunks(ihdr=struct.pack(">IIBBBBB", 1, 1, 16, 2, 0, 0, 0)), "only 8-bit RGB non-interlaced"),
    (chunks(ihdr=struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)), "only 8-bit RGB non-interlaced"),
    (chunks(ihdr=struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 1)), "only 8-bit RGB non-interlaced"),
    (chunks(idat=zlib.compress(b"\x00\x01\x02")), "IDAT holds 3 bytes, expected 4"),
    (chunks(idat=zlib.compress(b"\x05\x01\x02\x03")), "unknown PNG filter 5"),
])
def test_decoder_refuses_what_canvas_never_writes(data, message):
    with pytest.raises(ValueError, match=message):
        png.decode_png(data)


def test_decoder_checks_every_crc_and_reads_split_idat():
    good = chunks(extra=[png._chunk(b"tEXt", b"k\x00v")])
    assert png.decode_png(good) == (1, 1, [b"\x01\x02\x03"])
    bad = bytearray(good)
    bad[-20] ^= 0xFF  # inside the IDAT chunk
    with pytest.raises(ValueError, match="bad CRC in chunk b'IDAT'"):
        png.decode_png(bytes(bad))
    stream = zlib.compress(b"\x00\x01\x02\x03")
    split = (b"\x89PNG\r\n\x1a\n" + png._chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
             + png._chunk(b"IDAT", stream[:3]) + png._chunk(b"IDAT", stream[3:]) + png._chunk(b"IEND", b""))
    assert png.decode_png(split)[2] == [b"\x01\x02\x03"]
