"""Where an SGLang start went, from a saved log: the unit's journal (journalctl short-iso, the systemctl shim's
log) or SGLang's own output (a direct start's server.log). The collection's one reader of it
(plugins/module_utils/_startup_log.py), which the manifest's `startup` comes from too.

  python3 realgpu/startup_phases.py LOG [LOG...]     # one JSON line per log: the last start in it
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "collections"))
from ansible_collections.gpuserve.sglang.plugins.module_utils import _startup_log  # noqa: E402


def main(paths):
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as handle:
            print(json.dumps(dict(_startup_log.phases(handle.read().splitlines()), log=path)))


if __name__ == "__main__":
    main(sys.argv[1:])
