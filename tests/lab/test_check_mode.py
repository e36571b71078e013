"""`--check --diff` previews a change without failing, and changes nothing: a new NCCL value, new server arguments
and a new SGLang commit, each run as `ansible-playbook playbooks/deploy_eagle3.yml --check --diff`, exit 0 with the
file diff and the replica's decision ("would restart: env", "would restart: args", "would rebuild: commit") and say
which checks they leave out; `restart_server.yml --check` says it would restart. A real problem still fails in check
mode, naming it: an args file changed on disk since the verified start, which no pending change explains. After
each, the server has its PID, and its files and manifest their bytes. The machine-readable lines are read as the
README shows: the one line that starts with the prefix, then a JSON parser.

Lane main, on CT 101 as scripts/deploy and molecule `default` left it (a no-change state). About 20 s a run.
"""
import json

import pytest
import yaml

from labutil import LAB_MARKS, ROOT, finish, pct, playbook, why

pytestmark = LAB_MARKS
DEPLOY = "playbooks/deploy_eagle3.yml"
FILES = ["/etc/gpuserve/nccl.env", "/etc/gpuserve/sglang.args", "/etc/systemd/system/sglang.service",
         "/var/lib/gpuserve/sglang-manifest.json", "/opt/sglang/venv/pyvenv.cfg"]
with open("%s/inventory/lab/group_vars/sglang.yml" % ROOT, encoding="utf-8") as _handle:
    _LAB = yaml.safe_load(_handle)
with open("%s/roles/gpuserve/defaults/main.yml" % ROOT, encoding="utf-8") as _handle:
    NCCL = yaml.safe_load(_handle)["gpuserve_nccl_env"]
OLD_SGLANG = "290b64acf887063fd9a030bf35946481c23ca84d"  # lab/sglang_repo.py: 0.5.22, the lab's other commit


def server():
    """What a preview must leave as it was: the unit's main PID, the tree's HEAD, the files' sha1."""
    pid = pct("systemctl", "show", "sglang.service", "--property=MainPID", "--value").stdout.strip()
    head = pct("git", "-C", "/opt/sglang/src", "rev-parse", "HEAD").stdout.strip()
    return pid, head, pct("sha1sum", *FILES).stdout


def line(out, prefix):
    """The README's reading: the one line that starts with PREFIX and a space (grep), its JSON after it (a parser)."""
    found = [text for text in out.splitlines() if text.startswith(prefix + " ")]
    assert len(found) == 1, "%d %s lines" % (len(found), prefix)
    return json.loads(found[0].split(" ", 1)[1])


@pytest.fixture(scope="module")
def before(lab_up):
    if pct("systemctl", "is-active", "sglang.service", check=False).stdout.strip() != "active":
        pytest.fail("sglang.service is not active: run scripts/deploy first", pytrace=False)
    return server()


@pytest.mark.parametrize("settings, decision, diff", [
    ({"gpuserve_nccl_env": dict(NCCL, NCCL_PROTO="Simple")}, "would restart: env", ['-NCCL_PROTO="LL"',
                                                                                     '+NCCL_PROTO="Simple"']),
    ({"sglang_server_args": dict(_LAB["sglang_server_args"], mem_fraction_static=0.8)}, "would restart: args",
     ['-    "0.85",', '+    "0.8",']),
    ({"gpuserve_sglang_commit": OLD_SGLANG}, "would rebuild: commit", []),
], ids=["nccl", "args", "commit"])
def test_a_pending_change_is_previewed_with_rc_0_and_changes_nothing(before, settings, decision, diff):
    rc, out = finish(playbook(DEPLOY, "--check", "--diff", "-e", json.dumps(settings)))
    assert rc == 0, why(out)
    assert decision in out and all(d in out for d in diff), out[-4000:]
    assert "not checked in check mode" in out or "Verify | not checked" in out, out[-3000:]
    verified = line(out, "GPUSERVE_DEPLOY")["ct101"]
    assert verified["ok"] is True and verified["decision"].startswith(decision), verified
    assert any("the restart (stop, GPU release and gate" in s for s in verified["skipped"]), verified["skipped"]
    assert line(out, "GPUSERVE_VERIFY")["decision"] == verified["decision"]
    assert server() == before


def test_restart_server_in_check_mode_says_it_would_restart(before):
    rc, out = finish(playbook("playbooks/restart_server.yml", "--check"))
    assert rc == 0 and "would restart: restart_server.yml" in out, out[-3000:]
    assert server() == before


def test_drift_no_pending_change_explains_still_fails_in_check_mode(before):
    """The args file edited on disk since the verified start: the preview would restart, but the drift is not its
    own change, so the run fails naming it."""
    argv = json.loads(pct("cat", "/etc/gpuserve/sglang.args").stdout)
    edited = dict(argv, argv=argv["argv"] + ["--log-level", "debug"])
    pct("cp", "/etc/gpuserve/sglang.args", "/root/sglang.args.kept")
    try:
        pct("sh", "-c", "cat > /etc/gpuserve/sglang.args", stdin=json.dumps(edited))
        rc, out = finish(playbook(DEPLOY, "--check", "--diff"))
    finally:
        pct("cp", "/root/sglang.args.kept", "/etc/gpuserve/sglang.args")
        pct("rm", "-f", "/root/sglang.args.kept")
    flat = " ".join(out.split())
    assert rc != 0, flat[-3000:]
    assert "sglang_server verification failed: args file changed since the verified start" in flat, flat[-3000:]
    assert "would restart: args" in flat
    assert server() == before
