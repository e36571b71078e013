# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run in the SGLang venv, isolated (python -I -c, _install_fingerprint.probe_argv): what an import of SGLang depends
on inside the venv, its Python's version and every distribution's name and version. Prints one JSON object; its
text is an input of the install's fingerprint, so a change here invalidates every record (it is pinned by a test).

Private to this collection. A script, not a library: stdlib only; it travels as the module_utils file
_install_fingerprint imports, in sglang_install_info's payload and in the container helper's package.
"""
import importlib.metadata as md
import json
import sys

# A script another Python runs: its answer is what it prints.
# pylint: disable=ansible-bad-function


def main():
    print(json.dumps({"python": sys.version, "dists": sorted({(d.metadata["Name"] or "", d.version)
                                                              for d in md.distributions()})}))


if __name__ == "__main__":
    main()
