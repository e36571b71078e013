"""nvidia_driver filters: driver versions, mismatch, GPU counts and the install decision of nvidia_userspace."""
import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.filter.nvidia_driver import (
    FilterModule, nvidia_driver_mismatch, nvidia_driver_version, nvidia_gpu_count, nvidia_library_version,
    nvidia_userspace_plan)

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "nvidia-smi-h200")
MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95\n"


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as fh:
        return fh.read()


def smi(stdout="", stderr="", rc=0):
    return {"stdout": stdout, "stderr": stderr, "rc": rc}


def test_registered():
    filters = FilterModule().filters()
    for name in ("nvidia_driver_version", "nvidia_driver_mismatch", "nvidia_gpu_count", "nvidia_library_version",
                 "nvidia_userspace_plan"):
        assert name in filters


def test_version_from_real_proc_file():
    assert nvidia_driver_version(fixture("driver_version.out")) == "580.159.04"


def test_the_banner_is_not_a_version_source():
    """The collection reads the version from the driver_version query or /proc, nowhere else."""
    with pytest.raises(AnsibleFilterError):
        nvidia_driver_version(fixture("plain.out"))


@pytest.mark.parametrize("text,want", [
    ("580.159.04, 8\n" * 8, "580.159.04"),
    ("580.159.04\n", "580.159.04"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n", "535.104.05"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86  Release Build\n", "570.86"),
])
def test_version_formats(text, want):
    assert nvidia_driver_version(text) == want


def test_version_from_registered_result():
    assert nvidia_driver_version(smi("580.159.04, 2\n580.159.04, 2")) == "580.159.04"
    assert nvidia_driver_version(smi("580.159.04, 2\n", stderr="a warning\n")) == "580.159.04"


@pytest.mark.parametrize("text", ["", "bash: nvidia-smi: command not found", fixture("bad_index.out"),
                                  fixture("bad_field.out")])
def test_version_fails_closed(text):
    with pytest.raises(AnsibleFilterError):
        nvidia_driver_version(text)
    assert nvidia_driver_version(text, default="") == ""


def test_version_conflicting_lines():
    with pytest.raises(AnsibleFilterError, match="expected one version for every GPU"):
        nvidia_driver_version("580.159.04, 2\n580.95.05, 2\n")


def test_version_refuses_mismatch_output():
    with pytest.raises(AnsibleFilterError, match="mismatch"):
        nvidia_driver_version(MISMATCH)


def test_mismatch_detection():
    assert nvidia_driver_mismatch(MISMATCH)
    assert nvidia_driver_mismatch(smi(stdout="", stderr=MISMATCH, rc=18))
    assert not nvidia_driver_mismatch(fixture("plain.out"))
    assert not nvidia_driver_mismatch(None)


def test_gpu_count_list():
    out = "\n".join("GPU %d: NVIDIA H200 (UUID: GPU-%d)" % (i, i) for i in range(8))
    assert nvidia_gpu_count(out) == 8
    assert nvidia_gpu_count(smi(out)) == 8


def test_gpu_count_csv():
    assert nvidia_gpu_count("580.159.04, 8\n" * 8) == 8


@pytest.mark.parametrize("text", ["", fixture("bad_index.out"), "580.159.04, 8\n" * 7,
                                  "GPU 0: NVIDIA H200 (UUID: x)\nUnable to determine the device handle for GPU1\n",
                                  MISMATCH])
def test_gpu_count_fails_closed(text):
    with pytest.raises(AnsibleFilterError):
        nvidia_gpu_count(text)


@pytest.mark.parametrize("name", ["list_node_absent.out", "query_node_absent.out"])
def test_gpu_count_names_a_list_without_gpus(name):
    # real captures (driver 580): a GPU whose node is missing is not listed; `-L` then says so and exits 0
    with open(os.path.join(FIXTURES, "..", "nvidia-h200-minor", name)) as f:
        text = f.read()
    with pytest.raises(AnsibleFilterError, match=r"^nvidia-smi lists no GPU \('No devices (were )?found\.?'\): it "
                                                 r"lists only GPUs whose /dev/nvidiaN it can open"):
        nvidia_gpu_count(text)


def test_library_version():
    files = ["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.159.04"]
    assert nvidia_library_version(files) == "580.159.04"
    assert nvidia_library_version([{"path": files[0]}]) == "580.159.04"
    assert nvidia_library_version([]) is None
    with pytest.raises(AnsibleFilterError, match="side by side"):
        nvidia_library_version(files + ["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.86.15"])


HOST = fixture("driver_version.out")


def test_plan_nothing_installed():
    plan = nvidia_userspace_plan(HOST, None, smi(stderr="No such file or directory", rc=2))
    assert plan["install"] and plan["installed"] is None and not plan["mismatch"]
    assert plan["host"] == "580.159.04"


def test_plan_matching_library():
    plan = nvidia_userspace_plan(HOST, "580.159.04", smi("580.159.04, 8\n" * 8))
    assert not plan["install"] and plan["installed"] == "580.159.04"


def test_plan_older_library_differs():
    plan = nvidia_userspace_plan(HOST, "570.86.15", smi("580.159.04, 8\n" * 8))
    assert plan["install"] and "differs" in plan["reason"]


def test_plan_mismatch_reports_nvml_library_version():
    plan = nvidia_userspace_plan(HOST, None, smi(stdout=MISMATCH, rc=18))
    assert plan["install"] and plan["mismatch"] and plan["installed"] == "580.95"
    assert "Driver/library version mismatch" in plan["reason"]


def test_plan_lab_stand_in_without_libraries():
    # the lab's nvidia-smi stand-in answers the query in the container; no .run libraries there
    plan = nvidia_userspace_plan("580.159.04, 8\n" * 8, None, smi("580.159.04, 8\n" * 8))
    assert not plan["install"] and plan["installed"] == "580.159.04"


def test_plan_refuses_empty_host():
    with pytest.raises(AnsibleFilterError):
        nvidia_userspace_plan("", None, None)
