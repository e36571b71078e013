"""scripts/no_warnings.py: every Ansible warning in a run's output fails it, unless listed with a reason."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import no_warnings  # noqa: E402

OUT = """TASK [x] ****
ok: [ct101]
[WARNING]: Skipped '/var/lib/gpuserve-lab/gpus/nvidia-caps' path due to this access issue:
\x1b[1;35m[DEPRECATION WARNING]: Use of strategy plugins not included in ansible.builtin are deprecated\x1b[0m
    msg: 'a [WARNING]: inside a message is no warning'
GPUSERVE_DEPLOY {"ok": true}
"""


def test_each_warning_is_found_with_its_line():
    assert no_warnings.found(OUT) == [
        (3, "[WARNING]: Skipped '/var/lib/gpuserve-lab/gpus/nvidia-caps' path due to this access issue:"),
        (4, "[DEPRECATION WARNING]: Use of strategy plugins not included in ansible.builtin are deprecated")]


def test_an_allowed_warning_is_not():
    assert no_warnings.found(OUT, [("strategy plugins", "a reason")]) == [
        (3, "[WARNING]: Skipped '/var/lib/gpuserve-lab/gpus/nvidia-caps' path due to this access issue:")]


def test_every_allowed_warning_says_why():
    assert all(pattern and len(why) > 20 for pattern, why in no_warnings.ALLOWED)


def test_the_script_fails_on_a_warning_and_passes_a_clean_run(tmp_path):
    (tmp_path / "bad.log").write_text(OUT)
    (tmp_path / "clean.log").write_text("ok: [ct101]\nGPUSERVE_DEPLOY {}\n")
    script = os.path.join(ROOT, "scripts", "no_warnings.py")
    bad = subprocess.run([sys.executable, script, str(tmp_path / "bad.log")], capture_output=True, text=True)
    assert bad.returncode == 1 and "bad.log:3: [WARNING]: Skipped" in bad.stdout
    assert subprocess.run([sys.executable, script, str(tmp_path / "clean.log")]).returncode == 0
