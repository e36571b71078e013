"""_nvidia_userspace: the nvidia_userspace role's reads. The host's kernel module version from /proc, nvidia-smi only
without it; the container's versioned libraries (regular files, not links) and both nvidia-smi queries, every argv
from _nvidia_smi; a command's status and output as the role's filters read them."""
from ansible_collections.gpuserve.sglang.plugins.module_utils import _nvidia_userspace as nu
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Result

PROC = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n"
VERSION_COUNT = ["nvidia-smi", "--query-gpu=driver_version,count", "--format=csv,noheader"]


class Run:
    """run(argv) -> Result: the answers of a driver 580.159.04 with one GPU; records each argv."""

    def __init__(self, rc=0):
        self.calls, self.rc = [], rc

    def __call__(self, argv):
        self.calls.append(list(argv))
        if argv[1:] == ["-L"]:
            return Result(argv, self.rc, "GPU 0: NVIDIA H200 (UUID: GPU-1)\n", "")
        return Result(argv, self.rc, "580.159.04, 1\n\n", "warn\n")


def test_the_container_read_lists_the_versioned_libraries_and_runs_both_queries(tmp_path):
    (tmp_path / "libnvidia-ml.so.580.159.04").write_text("")
    (tmp_path / "libnvidia-ml.so.1").symlink_to(tmp_path / "libnvidia-ml.so.580.159.04")
    (tmp_path / "libnvidia-ml.so.575.1").symlink_to(tmp_path / "libnvidia-ml.so.580.159.04")
    (tmp_path / "libnvidia-ml.so.9.9").mkdir()
    (tmp_path / "libcuda.so.580.159.04").write_text("")
    run = Run()
    out = nu.read(dict(nu_params(), scope="container", lib_dir=str(tmp_path)), run)
    assert out == {"libs": [str(tmp_path / "libnvidia-ml.so.580.159.04")],
                   "smi": {"rc": 0, "stdout": "580.159.04, 1", "stderr": "warn"},
                   "list": {"rc": 0, "stdout": "GPU 0: NVIDIA H200 (UUID: GPU-1)", "stderr": ""}}
    assert run.calls == [VERSION_COUNT, ["nvidia-smi", "-L"]]


def test_the_container_read_without_the_library_directory_still_asks_nvidia_smi(tmp_path):
    run = Run(rc=127)
    out = nu.read(dict(nu_params(), scope="container", lib_dir=str(tmp_path / "none")), run)
    assert out["libs"] == [] and out["smi"]["rc"] == 127 and out["list"]["rc"] == 127


def test_the_host_read_takes_proc_and_asks_nvidia_smi_only_without_it(tmp_path):
    proc = tmp_path / "version"
    proc.write_text(PROC)
    run = Run()
    assert nu.read_host(run, "nvidia-smi", str(proc)) == {"proc": PROC, "smi": None}
    assert run.calls == []
    out = nu.read_host(run, "/opt/bin/nvidia-smi", str(tmp_path / "missing"))
    assert out == {"proc": None, "smi": {"rc": 0, "stdout": "580.159.04, 1", "stderr": "warn"}}
    assert run.calls == [["/opt/bin/nvidia-smi"] + VERSION_COUNT[1:]]


def test_the_host_scope_reads_the_real_proc_path(monkeypatch):
    seen = []
    monkeypatch.setattr(nu, "read_host", lambda run, smi: seen.append(smi) or {"proc": None, "smi": None})
    nu.read(dict(nu_params(), scope="host", nvidia_smi="smi"), Run())
    assert seen == ["smi"] and nu.PROC_VERSION == "/proc/driver/nvidia/version"


def nu_params():
    return {name: spec.get("default") for name, spec in nu.INFO_ARGS.items()}


def test_the_defaults_are_the_ones_the_role_used():
    assert nu_params() == {"scope": None, "lib_dir": "/usr/lib/x86_64-linux-gnu", "lib_pattern": "libnvidia-ml.so.*.*",
                           "nvidia_smi": "nvidia-smi", "nvidia_smi_timeout": 120.0}


MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95\n"


def test_a_mismatch_names_the_loaded_modules_version_and_the_userspaces():
    assert nu.mismatch(MISMATCH, PROC) == {"host": "580.159.04", "userspace": "580.95"}


def test_a_mismatch_without_a_readable_module_version_leaves_it_unknown():
    assert nu.mismatch(MISMATCH, None) == {"host": None, "userspace": "580.95"}
    assert nu.mismatch(MISMATCH, "garbage") == {"host": None, "userspace": "580.95"}
    assert nu.mismatch("Failed to initialize NVML: Driver/library version mismatch\n", PROC) == {
        "host": "580.159.04", "userspace": None}


def test_any_other_output_is_no_mismatch():
    assert nu.mismatch("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", PROC) is None
    assert nu.mismatch("", PROC) is None and nu.mismatch(None, PROC) is None


def test_the_proc_read_is_its_text_or_none(tmp_path):
    proc = tmp_path / "version"
    proc.write_text(PROC)
    assert nu.read_proc(str(proc)) == PROC
    assert nu.read_proc(str(tmp_path / "missing")) is None
