"""sglang.service as the role renders it (its template, the role's defaults and vars, the shared settings), through
ansible-playbook on localhost: the gate runs before every start, and what starts at boot."""
import json
import os
import subprocess
import sys

import pytest

# ansible-playbook renders the unit in a process of its own, with this collection's filters (sglang_gate_count):
# scripts/mutation leaves it out, as it does the other role runs (pytest.ini)
pytestmark = pytest.mark.foreign_python
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - {root}/roles/gpuserve/defaults/main.yml
    - {root}/roles/sglang_server/defaults/main.yml
    - {root}/roles/sglang_server/vars/main.yml
  vars:
    ansible_managed: managed
  tasks:
    - ansible.builtin.debug:
        msg: "{{{{ lookup('ansible.builtin.template', '{root}/roles/sglang_server/templates/etc/systemd/system/sglang.service.j2') }}}}"
"""


def render(tmp_path, **extra):
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(root=ROOT))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_LOCALHOST_WARNING="false")
    bin_dir = os.path.dirname(sys.executable)
    out = subprocess.run([os.path.join(bin_dir, "ansible-playbook"), "-i", "localhost,", str(play),
                          "-e", json.dumps(extra)], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    result = json.loads(out.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]
    return result.splitlines()


def lines_of(unit, key):
    return [line.split("=", 1)[1] for line in unit if line.startswith(key + "=")]


@pytest.fixture(scope="module")
def default_unit(tmp_path_factory):
    return render(tmp_path_factory.mktemp("unit"))


def test_every_start_gates_on_the_containers_gpus_first(default_unit):
    assert lines_of(default_unit, "ExecStartPre") == [
        "/usr/bin/python3 /usr/local/sbin/gpuserve-sglang gate --expected-count 8 --max-used-mib 0 --timeout 120"]
    assert lines_of(default_unit, "ExecStart") == [
        "/usr/bin/python3 /usr/local/sbin/gpuserve-sglang exec /etc/gpuserve/sglang.args -- "
        "/opt/sglang/venv/bin/python -m sglang.launch_server"]


def test_the_gate_follows_the_gpu_count_limit_and_its_own_timeout(tmp_path):
    unit = render(tmp_path, sglang_server_gpu_count=2, sglang_server_gate_max_used_mib=16,
                  sglang_server_unit_gate_timeout=45)
    assert lines_of(unit, "ExecStartPre") == [
        "/usr/bin/python3 /usr/local/sbin/gpuserve-sglang gate --expected-count 2 --max-used-mib 16 --timeout 45"]


def test_the_units_gate_timeout_defaults_to_the_lifecycles(tmp_path):
    unit = render(tmp_path, sglang_server_gate_timeout=300)
    assert lines_of(unit, "ExecStartPre")[0].endswith(" --timeout 300")


def test_it_starts_at_boot_and_never_restarts_itself(default_unit):
    assert lines_of(default_unit, "WantedBy") == ["multi-user.target"]
    assert lines_of(default_unit, "Restart") == ["no"]


def test_a_stop_by_hand_lets_sglang_drain_with_its_schedulers_alive(default_unit):
    # control-group SIGTERMed SGLang's schedulers at once (they install no handler): requests in flight failed
    assert lines_of(default_unit, "KillMode") == ["mixed"] and lines_of(default_unit, "KillSignal") == ["SIGTERM"]


def test_the_stop_timeout_covers_sglangs_shutdown_after_the_drain(default_unit, tmp_path):
    # SGLang's 5 s watchdog poll + the drain bound (30 s) + 15 s for its schedulers + 60 s to reap them
    assert lines_of(default_unit, "TimeoutStopSec") == ["110"]
    assert lines_of(render(tmp_path, sglang_server_stop_drain_timeout=0), "TimeoutStopSec") == ["80"]


def test_sglangs_compile_caches_are_in_a_folder_the_unit_keeps(default_unit):
    # SGLang 0.5.23 points Triton, Inductor, CUDA's and FlashInfer's caches under SGLANG_CACHE_DIR (sglang/__init__.py,
    # srt/environ.py third_party_cache_defaults); its own JIT kernels go to SGLANG_JIT_CACHE_DIR, else ~/.cache
    assert lines_of(default_unit, "CacheDirectory") == ["gpuserve/sglang"]
    assert ("SGLANG_CACHE_DIR=/var/cache/gpuserve/sglang SGLANG_JIT_CACHE_DIR=/var/cache/gpuserve/sglang/jit"
            in lines_of(default_unit, "Environment"))


def test_the_venvs_bin_comes_first_on_the_servers_path(default_unit, tmp_path):
    # SGLang 0.5.23 JIT-builds its RoPE kernel with the venv's `ninja` at the first CUDA graph capture; on the real
    # H200 (2026-12-03) the server died under systemd's PATH with "No such file or directory: 'ninja'".
    assert lines_of(default_unit, "Environment")[0] == (
        "PATH=/opt/sglang/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    unit = render(tmp_path, sglang_server_venv="/srv/venv")
    assert lines_of(unit, "Environment")[0].startswith("PATH=/srv/venv/bin:")


def test_the_workers_titles_leave_their_environ_readable(default_unit):
    # setproctitle (SGLang's sglang::scheduler titles) overwrites /proc/PID/environ without SPT_NOENV: on the real
    # H200 the env proof found none of the NCCL variables in the scheduler and detokenizer (2026-12-03).
    assert "SPT_NOENV=1" in lines_of(default_unit, "Environment")


def test_the_units_gate_expects_the_gpus_the_hosts_gate_selects(tmp_path):
    """The container sees exactly the GPUs the lifecycle's gate on the PVE host selects: its device minors, else its
    indexes, else its count; a host gate of every GPU without a count leaves the count unchecked here too."""
    assert lines_of(render(tmp_path, gpuserve_gpus=[4, 5, 6]), "ExecStartPre") == [
        "/usr/bin/python3 /usr/local/sbin/gpuserve-sglang gate --expected-count 3 --max-used-mib 0 --timeout 120"]
    assert lines_of(render(tmp_path, sglang_server_gate_gpus=[1, 2]), "ExecStartPre")[0].startswith(
        "/usr/bin/python3 /usr/local/sbin/gpuserve-sglang gate --expected-count 2 --max-used-mib")
    assert lines_of(render(tmp_path, sglang_server_gate_expected_count=0), "ExecStartPre") == [
        "/usr/bin/python3 /usr/local/sbin/gpuserve-sglang gate --max-used-mib 0 --timeout 120"]
