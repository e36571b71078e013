"""gpuserve.sglang.result_line: a run's machine-readable result printed as exactly one line, PREFIX and JSON, whatever
the stdout callback's settings, and written whole to its file."""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpuserve.sglang.plugins.action import result_line

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
# long enough that a callback folding long values folds it (the deploy's was 5,889 characters over 65 lines)
RESULT = {"ct101": {"ok": True, "problems": [], "note": "x " * 3000, "nested": {"list": list(range(40))}}}


def test_the_line_is_the_prefix_and_compact_ascii_json():
    text = result_line.line("GPUSERVE_DEPLOY", {"b": 1, "a": "é\nz"})
    assert text == 'GPUSERVE_DEPLOY {"a":"\\u00e9\\nz","b":1}' and "\n" not in text
    assert json.loads(text.split(" ", 1)[1]) == {"b": 1, "a": "é\nz"}


def test_the_file_is_written_whole_and_its_folder_made(tmp_path):
    path = tmp_path / "verify" / "ct101.json"
    result_line.write(str(path), RESULT)
    assert json.loads(path.read_text()) == RESULT and os.listdir(tmp_path / "verify") == ["ct101.json"]
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_a_write_that_fails_leaves_no_file(tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setattr(result_line.json, "dump", boom)
    with pytest.raises(ValueError):
        result_line.write(str(tmp_path / "deploy.json"), RESULT)
    assert os.listdir(tmp_path) == []


PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: The result
      gpuserve.sglang.result_line:
        prefix: GPUSERVE_DEPLOY
        result: "{{ lookup('ansible.builtin.file', '%s') | from_json }}"
        path: "%s"
"""


@pytest.mark.foreign_python
@pytest.mark.parametrize("settings", [
    {"ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml"},  # the repository's ansible.cfg
    {"ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.minimal"},
    {"ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml", "ANSIBLE_CALLBACK_FORMAT_PRETTY": "true", "COLUMNS": "40"},
], ids=["yaml", "minimal", "pretty-narrow"])
def test_a_real_play_prints_one_line_that_grep_and_a_json_parser_read(tmp_path, collections_path, settings):
    (tmp_path / "result.json").write_text(json.dumps(RESULT))
    out_file = tmp_path / "artifacts" / "deploy.json"
    (tmp_path / "play.yml").write_text(PLAY % (tmp_path / "result.json", out_file))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=collections_path,
               ANSIBLE_LOCALHOST_WARNING="false", **settings)
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-v",
                          str(tmp_path / "play.yml")], capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [line for line in run.stdout.splitlines() if line.startswith("GPUSERVE_DEPLOY ")]
    assert len(lines) == 1 and run.stdout.count("GPUSERVE_DEPLOY") == 1, run.stdout
    assert json.loads(lines[0].split(" ", 1)[1]) == RESULT
    assert json.loads(out_file.read_text()) == RESULT
