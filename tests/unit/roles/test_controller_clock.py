"""The controller's clock in the roles: an epoch is Jinja's now().timestamp(). now(utc=true) is a naive UTC time,
and .timestamp() of a naive time reads it as local time, so on a controller outside UTC the epoch is hours off:
the manifest's times.started_epoch (the next restart's and the audit's Xid cut-off) and the benchmark visit's Xid
cut-off with it. Lane faults runs its controller at TZ=EST5 so that the lab shows such a slip (tests/lab/lanes.py)."""
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NAIVE_UTC_EPOCH = re.compile(r"now\(\s*utc\s*=\s*true\s*\)\s*\.\s*timestamp\s*\(", re.IGNORECASE)

TEMPLATE = """
import json
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
templar = Templar(loader=DataLoader())
print(json.dumps([float(templar.template(trust_as_template("{{ %s.timestamp() }}" % call)))
                  for call in ("now()", "now(utc=true)")]))
"""


def yaml_files():
    for top in ("roles", "playbooks", "molecule", "realgpu"):
        for folder, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith((".yml", ".yaml", ".j2")):
                    yield os.path.join(folder, name)


def test_no_role_or_playbook_takes_an_epoch_from_now_utc():
    found = []
    for path in yaml_files():
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if NAIVE_UTC_EPOCH.search(line):
                    found.append("%s:%d: %s" % (os.path.relpath(path, ROOT), number, line.strip()))
    assert not found, "now(utc=true).timestamp() is hours off outside UTC; use now().timestamp():\n" + "\n".join(found)


def test_the_rule_scans_the_files_that_keep_the_clock():
    scanned = {os.path.relpath(p, ROOT) for p in yaml_files()}
    assert {"roles/sglang_server/tasks/lifecycle.yml", "roles/sglang_benchmark/tasks/visit.yml"} <= scanned
    assert NAIVE_UTC_EPOCH.search("'done': now(utc=True).timestamp(),")


def test_why_on_a_controller_west_of_utc_now_utc_is_five_hours_ahead_and_now_is_the_epoch():
    before = time.time()
    out = subprocess.run([sys.executable, "-c", TEMPLATE], env=dict(os.environ, TZ="EST5"), capture_output=True,
                         text=True, check=True, timeout=120).stdout
    after = time.time()
    local, naive_utc = json.loads(out.splitlines()[-1])
    assert before - 1 <= local <= after + 1
    assert abs((naive_utc - local) - 5 * 3600) < 60
