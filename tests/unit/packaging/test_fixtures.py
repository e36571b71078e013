"""The shipped copies of a real SGLang server's answers and log lines (tests/fixtures/sglang-0.5.23-h200-helper, read
by the shipped unit tests of the container helper) are what the real runs recorded (the capture and results/, which
do not ship)."""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HELPER = os.path.join(ROOT, "tests", "fixtures", "sglang-0.5.23-h200-helper")


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return handle.read()


def test_the_loads_answer_is_the_captures():
    capture = json.loads(read("tests", "fixtures", "sglang-0.5.23-h200", "capture.json"))
    assert json.loads(read(HELPER, "v1_loads.json")) == capture["endpoints"]["GET /v1/loads"]["body"]


def test_the_log_lines_are_the_real_runs_cut_at_400_characters():
    for name, source in (("startup_journal.txt", "results/2026-12-03-h200-real-sglang-lifecycle/journal.txt"),
                         ("server0_startup.log", "results/2026-12-03-h200-real-sglang/4-fidelity-capture/server0.log")):
        real = [line[:400] for line in read(source).splitlines()]
        for line in read(HELPER, name).splitlines():
            assert line in real, (name, line)
