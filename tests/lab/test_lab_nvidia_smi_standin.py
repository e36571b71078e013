"""The lab's SIMULATED nvidia-smi (lab/files/nvidia-smi) against the real H200 captures — no lab needed.

Runs the stand-in's run() on a temporary directory of simulated device files; holders are injected (no /proc
scan) except in the one test that holds a file for real.
"""
import importlib.machinery
import importlib.util
import os
import re
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STANDIN = os.path.join(ROOT, "lab", "files", "nvidia-smi")
CAPTURES = os.path.join(ROOT, "tests", "fixtures", "nvidia-smi-h200")
NO_PID = 2 ** 22 + 17  # above pid_max: /proc has no such process, so the default MiB applies


def load_standin():
    loader = importlib.machinery.SourceFileLoader("gpuserve_lab_nvidia_smi", STANDIN)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


smi = load_standin()


def capture(name):
    with open(os.path.join(CAPTURES, name + ".out"), encoding="utf-8") as f:
        out = f.read()
    rc_file = os.path.join(CAPTURES, name + ".rc")
    rc = 0
    if os.path.exists(rc_file):
        with open(rc_file, encoding="utf-8") as f:
            rc = int(f.read())
    return rc, out


@pytest.fixture()
def env(tmp_path):
    devs = tmp_path / "dev"
    devs.mkdir()
    for i in range(8):
        (devs / ("nvidia%d" % i)).write_bytes(b"")
    for n in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        (devs / n).write_bytes(b"")
    return {"GPUSIM_DEV_DIR": str(devs), "GPUSIM_STATE": str(tmp_path / "state.json"),
            "GPUSIM_CONF": str(tmp_path / "none.conf")}


def run(env, *argv, holders=None, now=None, **extra):
    e = dict(env, **extra)
    return smi.run(list(argv), environ=e, now=now, holders={} if holders is None else holders)


QUERY_GATE = "--query-gpu=index,uuid,memory.used,memory.total"


@pytest.mark.parametrize("name,argv", [
    ("gpu_full_idle", ["--query-gpu=index,uuid,name,memory.used,memory.total,memory.reserved,driver_version,"
                       "pci.bus_id", "--format=csv,noheader,nounits", "-i", "0"]),
    ("gpu_header", ["--query-gpu=index,memory.used", "--format=csv", "-i", "0"]),
    ("gpu_idle", ["--query-gpu=index,memory.used", "--format=csv,noheader,nounits", "--id=0"]),
    ("clocks_idle", ["--query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw,"
                     "clocks_event_reasons.active,clocks_throttle_reasons.active,pstate",
                     "--format=csv,noheader,nounits", "-i", "0"]),
    ("bad_field", ["--query-gpu=bogus_field", "--format=csv,noheader,nounits"]),
    ("bad_index", ["--query-gpu=index,memory.used", "--format=csv,noheader,nounits", "-i", "8"]),
    ("apps_idle", ["--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"]),
])
def test_idle_outputs_are_byte_identical_to_the_h200_captures(env, name, argv):
    assert run(env, *argv)[:2] == capture(name)


def test_busy_outputs_match_the_captures(env):
    holders = {NO_PID: {0}}
    rc, out, _ = run(env, "--query-gpu=index,memory.used", "--format=csv,noheader,nounits", "-i", "0",
                     holders=holders, GPUSIM_DEFAULT_MIB="8802")
    assert (rc, out) == capture("gpu_busy")
    rc, out, _ = run(env, "--query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw,"
                     "clocks_event_reasons.active,pstate", "--format=csv,noheader,nounits", "-i", "0",
                     holders=holders, GPUSIM_DEFAULT_MIB="8802")
    assert (rc, out) == capture("clocks_busy")


def test_a_real_holder_is_listed_with_its_pid_name_and_environ_mib(env):
    path = os.path.join(env["GPUSIM_DEV_DIR"], "nvidia0")
    holder = subprocess.Popen(["/bin/bash", "-c", 'exec 3<"$1"; exec -a python3 sleep 30', "bash", path],
                              env=dict(os.environ, GPUSIM_MIB="8802"))
    try:
        for _ in range(100):  # until the shell has opened the file and exec'd
            rc, out, _ = smi.run(["--query-compute-apps=gpu_uuid,pid,used_memory,process_name",
                                  "--format=csv,noheader,nounits"], environ=env)
            if "python3" in out:
                break
            time.sleep(0.02)
        expected = capture("apps_busy")[1].replace("434", str(holder.pid))
        assert (rc, out) == (0, expected)
    finally:
        holder.kill()
        holder.wait()


def test_memory_is_released_only_after_the_delay(env):
    argv = ["--query-gpu=index,memory.used", "--format=csv,noheader,nounits", "-i", "3"]
    t = 1000.0
    assert run(env, *argv, holders={NO_PID: {3}}, now=t, GPUSIM_DEFAULT_MIB="1000")[1] == "3, 1009\n"
    # the holder is gone: memory stays for 0.17 s (measured on the H200) from the first read that finds it
    # gone, then reads 0 — however long ago it was last seen alive
    assert run(env, *argv, holders={}, now=t + 10.0)[1] == "3, 1009\n"
    assert run(env, *argv, holders={}, now=t + 10.1)[1] == "3, 1009\n"
    assert run(env, *argv, holders={}, now=t + 10.18)[1] == "3, 0\n"
    assert run(env, *argv, holders={}, now=t + 10.19, GPUSIM_RELEASE_DELAY_S="5")[1] == "3, 0\n"


def test_release_delay_is_configurable(env):
    argv = ["--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"]
    run(env, *argv, holders={NO_PID: {0}}, now=50.0, GPUSIM_RELEASE_DELAY_S="1.0")
    assert run(env, *argv, holders={}, now=50.5, GPUSIM_RELEASE_DELAY_S="1.0")[1] != "0\n"
    assert run(env, *argv, holders={}, now=51.4, GPUSIM_RELEASE_DELAY_S="1.0")[1] != "0\n"
    assert run(env, *argv, holders={}, now=51.6, GPUSIM_RELEASE_DELAY_S="1.0")[1] == "0\n"


def test_a_holder_with_linger_keeps_its_memory_after_its_exit_with_no_process_listed(env):
    """Stuck memory: GPUSIM_LINGER_S in the holder's environ replaces the release delay for it."""
    holder = subprocess.Popen(["sleep", "30"], env=dict(os.environ, GPUSIM_MIB="1000", GPUSIM_LINGER_S="2.5"))
    try:
        argv = ["--query-gpu=index,memory.used", "--format=csv,noheader,nounits", "-i", "3"]
        apps = ["--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"]
        t = 2000.0
        assert run(env, *argv, holders={holder.pid: {3}}, now=t)[1] == "3, 1009\n"
    finally:
        holder.kill()
        holder.wait()
    assert run(env, *argv, holders={}, now=t + 10.0)[1] == "3, 1009\n"  # first read that finds it gone
    assert run(env, *apps, holders={}, now=t + 10.1)[1] == ""              # nobody left to name
    assert run(env, *argv, holders={}, now=t + 12.4)[1] == "3, 1009\n"   # past the 0.17 s default
    assert run(env, *argv, holders={}, now=t + 12.6)[1] == "3, 0\n"


def test_units_and_header_when_not_suppressed(env):
    rc, out, _ = run(env, "--query-gpu=index,memory.used,clocks.sm,power.draw,temperature.gpu", "--format=csv",
                     "-i", "1", holders={NO_PID: {1}}, GPUSIM_DEFAULT_MIB="100")
    assert out == ("index, memory.used [MiB], clocks.current.sm [MHz], power.draw [W], temperature.gpu\n"
                   "1, 109 MiB, 1980 MHz, 89.37 W, 36\n")


def test_gate_query_lists_eight_gpus_with_stable_distinct_uuids(env):
    rc, out, _ = run(env, QUERY_GATE, "--format=csv,noheader,nounits")
    lines = out.splitlines()
    assert rc == 0 and len(lines) == 8
    uuids = [line.split(", ")[1] for line in lines]
    assert len(set(uuids)) == 8 and all(re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", u)
                                        for u in uuids)
    assert all(line.endswith(", 0, 143771") for line in lines)
    assert run(env, QUERY_GATE, "--format=csv,noheader,nounits")[1] == out


def test_id_list_and_unknown_id(env):
    assert run(env, "--query-gpu=index", "--format=csv,noheader", "--id=0,5")[1] == "0\n5\n"
    assert run(env, "--query-gpu=index", "--format=csv,noheader", "-i", "0,9")[:2] == (6, "No devices were found\n")


def test_driver_version_and_count(env):
    rc, out, _ = run(env, "--query-gpu=driver_version,count", "--format=csv,noheader")
    assert (rc, out) == (0, "580.159.04, 8\n" * 8)


def test_list_gpus(env):
    out = run(env, "-L")[1].splitlines()
    assert out[0] == "GPU 0: NVIDIA H200 (UUID: GPU-553de4da-dd63-7f3a-8989-418ea85fc9f7)"
    assert len(out) == 8


def test_plain_output_has_the_real_layout(env):
    rc, out, _ = run(env, "-i", "0")
    real = capture("plain")[1].splitlines()
    mine = out.splitlines()
    assert rc == 0 and len(mine) == len(real)
    assert [len(line) for line in mine[1:]] == [len(line) for line in real[1:]]
    same = [i for i in range(1, len(real)) if i != 9]  # line 9: power/utilisation figures of that moment
    assert [mine[i] for i in same] == [real[i] for i in same]


def test_apps_are_listed_per_gpu_with_used_memory(env):
    rc, out, _ = run(env, "--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits",
                     holders={NO_PID: {2, 5}}, GPUSIM_DEFAULT_MIB="4096")
    assert rc == 0
    assert [line.split(", ")[1:] for line in out.splitlines()] == [[str(NO_PID), "4096"]] * 2


def test_no_driver_and_no_devices(tmp_path):
    e = {"GPUSIM_DEV_DIR": str(tmp_path), "GPUSIM_STATE": str(tmp_path / "s.json")}
    assert smi.run(["-L"], environ=e)[0] == 9
    (tmp_path / "nvidiactl").write_bytes(b"")
    assert smi.run(["-L"], environ=e)[:2] == (6, "No devices were found\n")


def test_the_standin_runs_under_debians_python3(env):
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    res = subprocess.run([py, STANDIN, "--query-gpu=index,memory.used", "--format=csv,noheader,nounits",
                          "-i", "0"], env=dict(os.environ, **env), capture_output=True, text=True, check=False)
    assert (res.returncode, res.stdout) == capture("gpu_idle")


def driver_map(env, tmp_path, **extra):
    """The stand-in's driver information tree, read by the collection's own _gpu_map (what the gate reads), and
    its `index,pci.bus_id,uuid` list, matched by UUID with the bus ids checked: [(index, minor)]."""
    from ansible_collections.gpuserve.sglang.plugins.module_utils import _gpu_map

    root = str(tmp_path / "driver" / "gpus")
    assert run(env, "--gpusim-driver-info", root, **extra) == (0, "", "")
    infos = {i["uuid"]: i for i in _gpu_map.read_information(root)}
    rc, out, _ = run(env, "--query-gpu=index,pci.bus_id,uuid", "--format=csv,noheader", **extra)
    assert rc == 0
    rows = [line.split(", ") for line in out.splitlines()]
    assert sorted(uuid for _i, _b, uuid in rows) == sorted(infos)
    assert all(_gpu_map.bus_id(bus) == infos[uuid]["bus_id"] for _i, bus, uuid in rows)
    return [(int(index), infos[uuid]["minor"]) for index, _b, uuid in rows]


def test_by_default_minor_n_is_gpu_n(env, tmp_path):
    assert driver_map(env, tmp_path) == [(i, i) for i in range(8)]


def test_a_bus_order_makes_the_index_differ_from_the_minor(env, tmp_path):
    order = dict(GPUSIM_BUS_ORDER="4,5,6,7,0,1,2,3")
    assert driver_map(env, tmp_path, **order) == [(0, 4), (1, 5), (2, 6), (3, 7), (4, 0), (5, 1), (6, 2), (7, 3)]
    # the memory of the GPU behind /dev/nvidia0 shows at index 4, and -i 4 selects it
    rc, out, _ = run(env, "--query-gpu=index,uuid,memory.used", "--format=csv,noheader,nounits",
                     holders={NO_PID: {0}}, GPUSIM_DEFAULT_MIB="4096", **order)
    rows = [line.split(", ") for line in out.splitlines()]
    assert rc == 0 and [r[0] for r in rows if r[2] != "0"] == ["4"] and rows[4][1] == smi.gpu_uuid(0)
    assert run(env, "-L", "-i", "4", **order)[1] == "GPU 4: NVIDIA H200 (UUID: %s)\n" % smi.gpu_uuid(0)


def test_the_driver_information_is_rewritten_whole(env, tmp_path):
    driver_map(env, tmp_path, GPUSIM_BUS_ORDER="1,0")
    assert driver_map(env, tmp_path) == [(i, i) for i in range(8)]
    assert len(os.listdir(str(tmp_path / "driver" / "gpus"))) == 8


def test_a_bus_order_naming_a_minor_twice_is_refused(env):
    rc, _out, err = run(env, "-L", GPUSIM_BUS_ORDER="0,0")
    assert rc == 1 and "lists a minor twice" in err


def test_a_driver_update_under_a_containers_userspace_fails_every_call_as_the_real_one(env, tmp_path):
    from ansible_collections.gpuserve.sglang.plugins.module_utils import _nvidia_userspace

    updated = dict(GPUSIM_DRIVER="590.48.01")
    # the host's userspace comes with its driver; so does a container's that nothing pinned
    assert run(env, "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0", **updated)[:2] == (
        0, "590.48.01\n")
    root = tmp_path / "driver" / "gpus"
    assert run(env, "--gpusim-driver-info", str(root), **updated) == (0, "", "")
    # a container whose userspace was matched to the old driver
    for argv in (["-L"], [QUERY_GATE, "--format=csv,noheader,nounits"]):
        assert run(env, *argv, GPUSIM_USERSPACE="580.159.04", **updated) == (
            18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.159\n", "")
    out = run(env, "-L", GPUSIM_USERSPACE="580.159.04", **updated)[1]
    # what the container's gate reads: the SIMULATED /proc/driver/nvidia/version and that output
    assert _nvidia_userspace.mismatch(out, _nvidia_userspace.read_proc(str(tmp_path / "driver" / "version"))) == {
        "host": "590.48.01", "userspace": "580.159"}
    assert run(env, "-L", GPUSIM_USERSPACE="590.48.01", **updated)[0] == 0


def test_as_nvidia_modprobe_it_makes_the_nodes_device_files_on_the_lab_host_only(tmp_path):
    state = tmp_path / "lab"
    (state / "pve").mkdir(parents=True)
    (state / "pve" / "nodename").write_text("lab-pve\n")
    (state / "nodes" / "lab-pve3").mkdir(parents=True)
    assert smi.modprobe(["-u", "-c", "0", "-c1"], environ={}, state=str(state)) == (0, "", "")
    made = sorted(os.listdir(str(state / "gpus")))
    assert made == ["nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidia1", "nvidiactl"]
    assert oct(os.stat(str(state / "gpus" / "nvidia0")).st_mode & 0o777) == "0o666"
    # another node's, as its boot runs it (GPUSERVE_LAB_NODE)
    assert smi.modprobe(["-m", "--create-nvidia-device-file=2"], environ={"GPUSERVE_LAB_NODE": "lab-pve3"},
                        state=str(state))[0] == 0
    assert sorted(os.listdir(str(state / "nodes" / "lab-pve3" / "gpus"))) == ["nvidia-modeset", "nvidia2", "nvidiactl"]
    assert smi.modprobe(["-x"], environ={}, state=str(state)) == (1, "", "nvidia-modprobe: unrecognized option '-x'\n")
    # in a container (no lab state) it makes nothing
    assert smi.modprobe(["-u"], environ={}, state=str(tmp_path / "none"))[0] == 1
