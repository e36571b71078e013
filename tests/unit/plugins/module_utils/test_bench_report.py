"""Report rendering (JSON, Markdown, PNG) of the benchmark (plugins/module_utils/_bench_report.py, _bench_png.py)."""
import json
import struct
import zlib

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench as b
from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_png as png
from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_report as rep

from ansible_collections.gpuserve.sglang.tests.unit.plugins.module_utils.test_bench import ARMS, SERVER_ARGS, make_runs


@pytest.fixture
def judged():
    visits = b.plan_arms(SERVER_ARGS, ARMS, 48)
    runs = make_runs(visits, {"baseline": 88.8, "eagle3-s2": 60.0, "eagle3-s3": 101.0}, concurrencies=(1, 8))
    return visits, runs, b.verdict(runs, visits)


def test_png_signature_ihdr_and_decode(judged):
    _visits, _runs, verdict = judged
    data = rep.render_png(verdict)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")
    width, height, depth, ctype = struct.unpack(">IIBB", data[16:26])
    assert (depth, ctype) == (8, 2) and width > 300 and height > 300
    w, h, rows = png.decode_png(data)
    assert (w, h) == (width, height) and len(rows) == h and all(len(r) == 3 * w for r in rows)
    pixels = {bytes(r[i:i + 3]) for r in rows for i in range(0, len(r), 3)}
    for key in ("baseline", "accepted", "rejected"):
        assert bytes(rep.COLORS[key]) in pixels, key
    try:  # a second, independent decoder where one is installed
        from PIL import Image  # noqa: F401 pylint: disable=import-outside-toplevel
    except ImportError:
        return
    import io  # pylint: disable=import-outside-toplevel
    assert Image.open(io.BytesIO(data)).size == (w, h)


def test_png_decoder_rejects_corruption(judged):
    data = bytearray(rep.render_png(judged[2]))
    data[40] ^= 0xFF
    with pytest.raises(ValueError):
        png.decode_png(bytes(data))
    with pytest.raises(ValueError, match="signature"):
        png.decode_png(b"GIF89a")


def test_canvas_roundtrip_other_filters():
    cv = png.Canvas(4, 2)
    cv.rect(0, 0, 1, 1, (10, 20, 30))
    raw_rows = cv.rows
    # re-encode with the Sub filter to check the decoder's unfiltering against the Canvas pixels
    raw = b""
    for row in raw_rows:
        out = bytearray(row)
        for i in range(len(row) - 1, 2, -1):
            out[i] = (row[i] - row[i - 3]) & 0xFF
        raw += b"\x01" + bytes(out)
    ihdr = struct.pack(">IIBBBBB", 4, 2, 8, 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + png._chunk(b"IHDR", ihdr) + png._chunk(b"IDAT", zlib.compress(raw)) + png._chunk(b"IEND", b"")
    assert png.decode_png(data)[2] == [bytes(r) for r in raw_rows]


def test_markdown_table_and_provenance(judged):
    _visits, runs, verdict = judged
    md = rep.render_markdown(verdict, runs, {"timestamp": "20261130T000000Z", "chart": "chart.png"})
    assert "**Verdict: eagle3-s3 is 13.7% faster" in md
    assert "| eagle3-s2 | rejected | 60.00 (59.80-60.20, 3) | -32.4% |" in md
    assert "| baseline | baseline | 88.80 (88.60-89.00, 9) | - |" in md
    assert "| 2 | baseline | 1 | 88.80 (0.5%) |" in md
    assert "- SGLang commit: " + "a" * 40 in md
    assert "SM clock 1980-1980 MHz" in md and "reasons seen: none" in md
    assert '"NCCL_ALGO": "Ring"' in md


def test_json_document_keeps_provenance_with_every_figure(judged):
    visits, runs, verdict = judged
    doc = json.loads(rep.render_json(rep.build_document(verdict, runs, visits, {"timestamp": "t"})))
    assert doc["format"] == 1 and doc["verdict"]["winner"] == "eagle3-s3"
    assert len(doc["runs"]) == len(runs)
    assert all(r["provenance"]["sglang_commit"] == "a" * 40 and r["gpu_before"] and r["gpu_after"] for r in doc["runs"])
    assert doc["visits"][1]["server_args"]["speculative_num_steps"] == 2
    assert doc["visits"][1]["stats"]["concurrency"]["1"]["output_throughput"]["median"] == pytest.approx(60.0)
