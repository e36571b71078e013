# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run by the SGLang venv's Python (python -c, _bench_client.pick_client_argv): resolves the benchmark client
without importing sglang (its __init__ pulls in torch): finds the package, then the file. argv: [--import]
MODULE...; prints the first MODULE that exists. With --import it also imports that module once: the only complete
test of the client's dependency set (0.5.23 imports transformers, datasets, torchvision, ... on every path). The
import's own output goes to stderr, so stdout stays the module name; on failure the last stderr line is the message
(import warnings come before it).

Private to this collection. A script, not a library: stdlib only; sglang_bench_run's payload carries it as the
module_utils file _bench_client imports.
"""
import contextlib
import importlib
import importlib.util
import os
import sys

# A script another Python runs: its answer is what it prints, its failure its exit message.
# pylint: disable=ansible-bad-function


def main(args):
    do_import = args[:1] == ['--import']
    mods = args[1:] if do_import else args
    spec = importlib.util.find_spec('sglang')
    if spec is None or not spec.submodule_search_locations:
        sys.exit('sglang is not installed in ' + sys.prefix)
    root = list(spec.submodule_search_locations)[0]
    found = [m for m in mods if os.path.isfile(os.path.join(root, *m.split('.')[1:]) + '.py')]
    if not found:
        sys.exit('no benchmark client (%s) in %s' % (' or '.join(mods), root))
    if do_import:
        try:
            with contextlib.redirect_stdout(sys.stderr):
                importlib.import_module(found[0])
        except Exception as exc:
            sys.exit('%s does not import in %s: %s: %s (install what it needs into that venv)'
                     % (found[0], sys.prefix, type(exc).__name__, exc))
    print(found[0])


if __name__ == '__main__':
    main(sys.argv[1:])
