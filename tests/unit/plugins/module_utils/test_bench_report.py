"""Report rendering (JSON, Markdown, PNG) of the benchmark (plugins/module_utils/_bench_report.py, _bench_png.py)."""
import json
import struct
import zlib

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench as b
from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_verdict as bv
from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_png as png
from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_report as rep

from ansible_collections.gpuserve.sglang.tests.support.bench import ARMS, SERVER_ARGS, make_runs
from ansible_collections.gpuserve.sglang.tests.support.gpu_health import XID79, reading


@pytest.fixture
def judged():
    visits = b.plan_arms(SERVER_ARGS, ARMS, 48)
    runs = make_runs(visits, {"baseline": 88.8, "eagle3-s2": 60.0, "eagle3-s3": 101.0}, concurrencies=(1, 8))
    return visits, runs, bv.verdict(runs, visits)


def paeth(a, up, c):
    p = a + up - c
    return a if abs(p - a) <= abs(p - up) and abs(p - a) <= abs(p - c) else up if abs(p - up) <= abs(p - c) else c


def predictor(ftype, a, up, c):
    """PNG filter predictors (spec 9.2): a = left, up = above, c = above-left."""
    return (0, a, up, (a + up) // 2, paeth(a, up, c))[ftype]


def stdlib_png(data):
    """A second decoder, independent of _bench_png's, written from the PNG spec with zlib and struct: checks the
    signature, every chunk's CRC and the IHDR, inflates the IDAT stream and undoes the row filters.
    Returns (width, height, channels, number of bytes the IDAT stream inflates to, rows)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    chunks, pos = [], 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        assert len(body) == length, kind
        assert struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0] == zlib.crc32(kind + body), kind
        chunks.append((kind, body))
        pos += 12 + length
    assert chunks[0][0] == b"IHDR" and len(chunks[0][1]) == 13 and chunks[-1] == (b"IEND", b"")
    width, height, depth, ctype, compression, filtering, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, compression, filtering, interlace) == (8, 0, 0, 0)
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[ctype]
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride, rows, prev = width * channels, [], bytes(width * channels)
    for y in range(min(height, len(raw) // (stride + 1))):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        assert ftype <= 4, (y, ftype)
        for i in range(stride):
            a, c = (line[i - channels], prev[i - channels]) if i >= channels else (0, 0)
            line[i] = (line[i] + predictor(ftype, a, prev[i], c)) & 0xFF
        prev = bytes(line)
        rows.append(prev)
    return width, height, channels, len(raw), rows


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
    # the stdlib decoder agrees: RGB, one filter byte plus width*3 bytes per row, and the same pixels
    sw, sh, channels, size, srows = stdlib_png(data)
    assert (sw, sh, channels) == (w, h, 3)
    assert size == h * (1 + w * channels)
    assert srows == [bytes(r) for r in rows]


def test_stdlib_png_decoder_catches_a_corrupt_or_short_image(judged):
    data = rep.render_png(judged[2])
    w, h = struct.unpack(">II", data[16:24])
    with pytest.raises(AssertionError, match="IDAT"):  # a flipped byte inside the IDAT: its CRC no longer matches
        stdlib_png(data[:60] + bytes([data[60] ^ 0xFF]) + data[61:])
    # an IHDR that promises h rows over an IDAT that holds h - 1
    raw = b"".join(b"\x00" + bytes(row) for row in png.Canvas(w, h - 1).rows)
    short = (data[:8] + png._chunk(b"IHDR", data[16:29]) + png._chunk(b"IDAT", zlib.compress(raw))
             + png._chunk(b"IEND", b""))
    assert stdlib_png(short)[:4] == (w, h, 3, (h - 1) * (1 + w * 3))


def test_png_decoder_rejects_corruption(judged):
    data = bytearray(rep.render_png(judged[2]))
    data[40] ^= 0xFF
    with pytest.raises(ValueError):
        png.decode_png(bytes(data))
    with pytest.raises(ValueError, match="signature"):
        png.decode_png(b"GIF89a")


@pytest.mark.parametrize("ftype", [0, 1, 2, 3, 4])
def test_canvas_roundtrip_every_filter(ftype):
    cv = png.Canvas(5, 3)
    cv.rect(0, 0, 1, 1, (10, 20, 30))
    cv.rect(2, 1, 4, 2, (200, 100, 250))
    cv.rect(4, 0, 4, 0, (7, 255, 128))  # one pixel
    # re-encode with one filter on every row to check both decoders' unfiltering against the Canvas pixels
    raw, prev = b"", bytes(15)
    for row in cv.rows:
        out = bytearray()
        for i, x in enumerate(row):
            a, c = (row[i - 3], prev[i - 3]) if i >= 3 else (0, 0)
            out.append((x - predictor(ftype, a, prev[i], c)) & 0xFF)
        raw += bytes([ftype]) + bytes(out)
        prev = bytes(row)
    ihdr = struct.pack(">IIBBBBB", 5, 3, 8, 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + png._chunk(b"IHDR", ihdr) + png._chunk(b"IDAT", zlib.compress(raw)) + png._chunk(b"IEND", b"")
    assert png.decode_png(data)[2] == [bytes(r) for r in cv.rows]
    assert stdlib_png(data)[4] == [bytes(r) for r in cv.rows]


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


def test_the_provenance_says_each_gpu_link_and_xid_event_the_runs_saw(judged):
    _visits, runs, verdict = judged
    md = rep.render_markdown(verdict, runs, {})
    assert "GPU health" not in md  # no run carries a reading
    for r in runs:
        r["provenance"]["gpu_health"] = reading()
    runs[0]["provenance"]["gpu_health"] = reading(dmesg=XID79)
    runs[1]["provenance"]["gpu_health"] = {"error": "nvidia-smi health query timed out"}
    md = rep.render_markdown(verdict, runs, {})
    line = next(x for x in md.splitlines() if x.startswith("- GPU health after each run: "))
    assert line.startswith("- GPU health after each run: PCIe links GPU 0 (bus 0000:00:06.0) Gen 5 x16; Xid events: "
                           "GPU 0 (bus 0000:00:06.0): 1 Xid event(s)")
    assert line.endswith("; not read: nvidia-smi health query timed out")


def test_json_document_keeps_provenance_with_every_figure(judged):
    visits, runs, verdict = judged
    doc = json.loads(rep.render_json(rep.build_document(verdict, runs, visits, {"timestamp": "t"})))
    assert doc["format"] == 1 and doc["verdict"]["winner"] == "eagle3-s3"
    assert len(doc["runs"]) == len(runs)
    assert all(r["provenance"]["sglang_commit"] == "a" * 40 and r["gpu_before"] and r["gpu_after"] for r in doc["runs"])
    assert doc["visits"][1]["server_args"]["speculative_num_steps"] == 2
    assert doc["visits"][1]["stats"]["concurrency"]["1"]["output_throughput"]["median"] == pytest.approx(60.0)
    assert (doc["verdict"]["decision_concurrency"], doc["verdict"]["serving_concurrency"]) == (8, 48)
    assert doc["verdict"]["decision_concurrency_why"].startswith("the highest measured: the serving concurrency")
    assert doc["arms"][1]["losses"] and doc["arms"][1]["flags"] == []


def test_each_variants_decision_says_why_its_accept_length_and_its_flags(judged):
    visits, runs, _verdict = judged
    for v in visits:
        if v["arm"] == "eagle3-s3":
            v["args"]["speculative_adaptive"] = True
    for r in runs:
        if r["arm"] == "eagle3-s3":
            r["metrics"]["accept_length_source"] = "metrics"
    md = rep.render_markdown(bv.verdict(runs, visits), runs, {})
    decisions = md.split("## Decisions\n\n")[1].split("\n\n")[0].splitlines()
    assert decisions == [
        "- eagle3-s2: rejected: 32.4% slower at concurrency 1 and 32.4% slower at concurrency 8 than the adjacent "
        "baselines: a loss beyond 3.0% at any measured concurrency blocks acceptance. Accept length 2.50. Lossy or "
        "adaptive settings: none.",
        "- eagle3-s3: accepted: +13.7% at concurrency 8. Accept length 2.50 (metrics). Lossy or adaptive settings: "
        "speculative_adaptive is on: SGLang changes the number of draft steps at run time from the accept rate, so "
        "speculative_num_steps is where it starts, not what ran, and a measurement holds for the steps it settled "
        "on."]


def test_an_invalid_arm_names_its_problems_and_a_draft_that_does_not_work_its_reason(judged):
    visits, runs, _verdict = judged
    for r in runs:
        if r["arm"] == "eagle3-s2":
            r["metrics"]["accept_length"] = 1.0
        if r["arm"] == "eagle3-s3" and r["repeat"] == 0:
            r["metrics"]["accept_length"] = None
    verdict = bv.verdict(runs, visits)
    md = rep.render_markdown(verdict, runs, {})
    assert ("- eagle3-s2: draft not working: the draft is not working (accept length 1.00): check the algorithm and "
            "the draft. Accept length 1.00.") in md
    assert "- eagle3-s3: invalid: visit 3 eagle3-s3 at concurrency 1: 1 of 3 runs have no accept-length reading" in md
    assert "| eagle3-s2 | draft not working |" in md
    rows = png.decode_png(rep.render_png(verdict))[2]
    assert painted(rows, "draft_not_working") > LEGEND_BOX and painted(rows, "invalid") > LEGEND_BOX


LEGEND_BOX = 9 * png.GLYPH_H  # the legend's swatch of each colour: a bar of that colour paints more


def painted(rows, key):
    colour = bytes(rep.COLORS[key])
    return sum(1 for r in rows for i in range(0, len(r), 3) if bytes(r[i:i + 3]) == colour)


def test_an_inconclusive_arm_has_its_own_colour_and_the_legend_fits_a_narrow_chart():
    visits = b.plan_arms(SERVER_ARGS, ARMS[:1], 1)
    runs = make_runs(visits, {"baseline": 64.0, "eagle3-s2": 72.0}, jitter=8.0)  # repeats 64, 72, 80
    verdict = bv.verdict(runs, visits)
    assert [a.get("decision") for a in verdict["arms"]] == [None, "inconclusive"]
    width, _height, rows = png.decode_png(rep.render_png(verdict))
    assert width == 70 + sum(12 + png.text_width(rep._words(k)) + 10 for k in rep.LEGEND) > 70 + 20 + 70 * 3
    assert painted(rows, "inconclusive") > LEGEND_BOX and painted(rows, "accepted") == LEGEND_BOX


def test_markdown_names_the_thresholds_and_both_reason_rules(judged):
    visits, runs, _verdict = judged
    verdict = bv.verdict(runs, visits, drift_pct=2.5, min_speedup_pct=4.0, throttle_reasons=["hw_slowdown"],
                         matched_reasons=["sw_power_cap", "applications_clocks_setting"])
    md = rep.render_markdown(verdict, runs, {"timestamp": "20261130T000000Z", "chart": "chart.png"})
    assert ("Decision at concurrency 8, the highest measured: the serving concurrency (max_running_requests 48) was "
            "not measured; add it to sglang_benchmark_concurrency to decide there; an arm must be at least 4.0% "
            "faster than the mean of its two adjacent fresh baselines, which may drift at most 2.5%, with the gain "
            "outside the scatter of the repeats, and no more than 4.0% slower at any measured concurrency; an accept "
            "length at or below 1.05 is a draft that does not work; throttle reasons that invalidate: hw_slowdown; "
            "reasons that must match between a variant and its baselines: sw_power_cap, applications_clocks_setting. "
            "Baseline drift over the whole benchmark: 0.0%.") in md
    none = rep.render_markdown(bv.verdict(runs, visits, throttle_reasons=[], matched_reasons=[]), runs, {})
    assert "throttle reasons that invalidate: none; reasons that must match between a variant and its baselines: none." in none
