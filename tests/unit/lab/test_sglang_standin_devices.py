"""The SIMULATED server's CUDA device order: rank i holds the i-th /dev/nvidiaN the container has (by minor), so a
container passed GPUs 4-7 runs tp 4 on them, as CUDA numbers the GPUs it sees from 0."""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPEC = importlib.util.spec_from_file_location("sglang_standin", os.path.join(ROOT, "lab", "files", "sglang_standin.py"))
standin = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(standin)


def devices(tmp_path, *names):
    for name in names:
        (tmp_path / name).write_bytes(b"")
    return str(tmp_path)


def test_ordinals_follow_the_minors_the_container_has(tmp_path):
    dev = devices(tmp_path, "nvidia4", "nvidia10", "nvidia5", "nvidia7", "nvidiactl", "nvidia-uvm")
    assert [standin.device_for_ordinal(i, dev) for i in range(4)] == ["nvidia4", "nvidia5", "nvidia7", "nvidia10"]


def test_all_eight_gpus_keep_the_identity(tmp_path):
    dev = devices(tmp_path, *["nvidia%d" % i for i in range(8)])
    assert [standin.device_for_ordinal(i, dev) for i in range(8)] == ["nvidia%d" % i for i in range(8)]


def test_an_ordinal_beyond_the_devices_names_a_node_that_is_not_there(tmp_path):
    dev = devices(tmp_path, "nvidia4")
    assert standin.device_for_ordinal(1, dev) == "nvidia1"  # the scheduler then fails to open it, as CUDA would
    assert standin.device_for_ordinal(0, str(tmp_path / "missing")) == "nvidia0"
