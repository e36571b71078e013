"""The nvidia_userspace role's reads, one call per machine (sent on stdin: python3 - MODE ...). Stdlib only.

  host
      On the PVE host: /proc/driver/nvidia/version (the loaded kernel module); only when that is missing, the
      result of `nvidia-smi --query-gpu=driver_version,count --format=csv,noheader`.
  container --lib-dir DIR --pattern GLOB
      In the container: the regular files DIR/GLOB (the .run userspace's libnvidia-ml.so.<version>), the result
      of that query and of `nvidia-smi -L`.
Prints one JSON object; a command result is {rc, stdout, stderr}; a command that cannot run or does not answer
within SMI_TIMEOUT seconds has rc 127.

Sent ahead of it on the same stdin: the collection's plugins/module_utils/_nvidia_smi.py, which builds every
nvidia-smi argv the collection runs (roles/nvidia_userspace/vars/main.yml, __nvidia_userspace_state_script); the
server's helper runs its queries with the same file.
"""
import argparse
import fnmatch
import json
import os
import subprocess
import sys


SMI_TIMEOUT = 120


def _run(argv):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=SMI_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"rc": 127, "stdout": "", "stderr": str(exc)}
    return {"rc": proc.returncode, "stdout": proc.stdout.rstrip("\n"), "stderr": proc.stderr.rstrip("\n")}


def _sent(name):
    """A function of plugins/module_utils/_nvidia_smi.py, which the role sends ahead of this file on stdin."""
    if name not in globals():
        sys.exit("nvidia_userspace_state.py: send plugins/module_utils/_nvidia_smi.py ahead of it on the same stdin")
    return globals()[name]


def main():
    _sent("version_count_query")  # refuse before reading anything
    parser = argparse.ArgumentParser(prog="nvidia_userspace_state")
    parser.add_argument("mode", choices=["host", "container"])
    parser.add_argument("--lib-dir")
    parser.add_argument("--pattern")
    opts = parser.parse_args()
    if opts.mode == "host":
        try:
            with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as handle:
                result = {"proc": handle.read(), "smi": None}
        except OSError:
            result = {"proc": None, "smi": _run(_sent("version_count_query")("nvidia-smi"))}
    else:
        try:
            names = sorted(os.listdir(opts.lib_dir))
        except OSError:
            names = []
        libs = [os.path.join(opts.lib_dir, name) for name in names if fnmatch.fnmatch(name, opts.pattern)]
        result = {
            "libs": [path for path in libs if os.path.isfile(path) and not os.path.islink(path)],
            "smi": _run(_sent("version_count_query")("nvidia-smi")),
            "list": _run(_sent("list_query")("nvidia-smi")),
        }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
