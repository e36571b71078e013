"""gpuserve.sglang.lifecycle_lock in a real play on localhost, with the container helper installed into a folder and
a lock file of the test's own: taken naming this run, kept when this run holds it (re-entrant), released only by
the scope that took it; check mode takes none; a second run fails naming the first."""
import json
import os
import signal
import subprocess
import sys

import pytest

from ansible_collections.gpuserve.sglang.tests.support.sglang_helper import install

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PLAY = """
- name: The lock play
  hosts: localhost
  gather_facts: false
  vars:
    lock_args: {helper: "%(helper)s", path: "%(path)s", ttl: 60}
  tasks:
    - name: Take it
      gpuserve.sglang.lifecycle_lock: "{{ lock_args | combine({'scope': 'main', 'held': __lock | default({})}) }}"
      register: __lock
    - name: Taken
      gpuserve.sglang.result_line: {prefix: TAKEN, result: "{{ __lock }}"}
    - name: Take it again, nested
      gpuserve.sglang.lifecycle_lock: "{{ lock_args | combine({'scope': 'restart', 'held': __lock}) }}"
      register: __lock
    - name: Release as the nested scope
      gpuserve.sglang.lifecycle_lock: "{{ lock_args | combine({'scope': 'restart', 'held': __lock, 'state': 'released'}) }}"
      register: __lock
    - name: Kept
      gpuserve.sglang.result_line: {prefix: KEPT, result: "{{ __lock }}"}
    - name: Hold on
      ansible.builtin.pause: {seconds: "%(pause)s"}
    - name: Release as the scope that took it
      gpuserve.sglang.lifecycle_lock: "{{ lock_args | combine({'scope': 'main', 'held': __lock, 'state': 'released'}) }}"
      register: __lock
    - name: Released
      gpuserve.sglang.result_line: {prefix: RELEASED, result: "{{ __lock }}"}
"""


def said(out, word):
    """The value the play printed with result_line's PREFIX word."""
    return json.loads(next(x for x in out.splitlines() if x.startswith(word + " ")).split(" ", 1)[1])


@pytest.fixture
def play(tmp_path, collections_path):
    helper = install(tmp_path / "helper")

    def run(*extra, pause=0, background=False):
        (tmp_path / "play.yml").write_text(PLAY % {"helper": helper, "path": tmp_path / "run" / "lock", "pause": pause})
        env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=collections_path,
                   ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_PYTHON_INTERPRETER=sys.executable)
        argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(tmp_path / "play.yml")] + list(extra)
        if background:
            return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    run.status = lambda: json.loads(subprocess.run([sys.executable, helper, "lock", "status", "--path",
                                                    str(tmp_path / "run" / "lock")], capture_output=True, text=True,
                                                   check=True).stdout)
    return run


@pytest.mark.foreign_python
def test_taken_kept_by_a_nested_scope_and_released_by_its_own(play):
    run = play()
    assert run.returncode == 0, run.stdout + run.stderr
    taken = said(run.stdout, "TAKEN")
    assert taken["scope"] == "main" and len(taken["token"]) == 16 and taken["cleared"] is None
    assert taken["run"]["play"] == "The lock play" and taken["run"]["pid"] > 1
    assert said(run.stdout, "KEPT")["token"] == taken["token"]
    assert said(run.stdout, "RELEASED")["token"] == "" and play.status() == {"held": False, "owner": {}}


@pytest.mark.foreign_python
def test_check_mode_takes_no_lock(play):
    run = play("--check")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "token" not in said(run.stdout, "TAKEN") and play.status() == {"held": False, "owner": {}}


@pytest.mark.foreign_python
def test_a_second_run_fails_naming_the_first(play):
    first = play(pause=20, background=True)
    try:
        for _attempt in range(200):
            if play.status().get("owner", {}).get("run"):
                break
            subprocess.run(["sleep", "0.1"], check=True)
        second = play()
        assert second.returncode == 2, second.stdout
        assert "ansible-playbook PID %d" % first.pid in " ".join(second.stdout.split()), second.stdout
    finally:
        first.kill()
        first.wait()
        holder = play.status().get("owner", {}).get("holder_pid")
        if holder:  # the killed run's holder keeps the lock until its lease ends
            os.kill(holder, signal.SIGTERM)
