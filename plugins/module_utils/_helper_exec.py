# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuserve-sglang exec: sglang.service's ExecStart, the server's argv from its args file, no shell.

Private to this collection. Part of the container helper's package (_helper_cli.PACKAGE), which the module
gpuserve.sglang.sglang_helper installs: stdlib only at load, and it imports only files of that package.
"""
import json
import os
import sys


def cmd_exec(argv):
    """exec ARGS_FILE -- ENTRYPOINT...: exec the entrypoint with the argv from the args file."""
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: gpuserve-sglang exec ARGS_FILE -- ENTRYPOINT [ARGS...]\n")
        return 64
    with open(argv[1], encoding="utf-8") as handle:
        args = json.load(handle).get("argv")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        sys.stderr.write(f"gpuserve-sglang exec: {argv[1]}: 'argv' must be a list of strings\n")
        return 65
    entry = argv[3:]
    sys.stderr.write(f"gpuserve-sglang exec: exec {json.dumps(entry + args)}\n")
    sys.stderr.flush()
    os.execv(entry[0], entry + args)
    return 127  # not reached
