#!/usr/bin/env python3
# Installed by the gpuserve.sglang sglang_gateway role.
"""Start SGLang's gateway (`smg launch`) with its arguments from a JSON file and its control-plane keys from a
root-only file, so that no key is in an argv, the unit file or `systemctl show`.

    gpuserve_smg_launch.py ARGS_JSON KEYS_FILE     run the gateway (KEYS_FILE: one id:name:role:key per line; - none)
    gpuserve_smg_launch.py --check ARGS_JSON       parse the arguments with smg's own parser, start nothing

The role runs --check on a new arguments file before it replaces the one the running gateway was started with.
"""
import contextlib
import io
import json
import sys


def load_args(path):
    with open(path) as src:
        args = json.load(src)
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise SystemExit('{0}: expected a JSON list of strings (the smg launch arguments)'.format(path))
    return args


def load_keys(path):
    if path == '-':
        return []
    with open(path) as src:
        return [line.strip() for line in src if line.strip() and not line.lstrip().startswith('#')]


def smg_version():
    try:
        from importlib.metadata import version
        return version('smg')
    except Exception:  # noqa: BLE001 - only for the message
        return '(version unknown)'


def main(argv):
    from smg.launch_router import launch_router, parse_router_args
    if len(argv) == 2 and argv[0] == '--check':
        args, err = load_args(argv[1]), io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                parse_router_args(args)
        except SystemExit as exc:
            # argparse's usage runs to 250 lines: keep its last line, the error.
            lines = err.getvalue().strip().splitlines()
            print('smg {0} refuses these launch arguments: {1}'.format(
                smg_version(), lines[-1] if lines else exc), file=sys.stderr)
            return 2
        print('smg launch arguments parse: ' + argv[1])
        return 0
    if len(argv) != 2:
        raise SystemExit(__doc__)
    args, keys = load_args(argv[0]), load_keys(argv[1])
    launch_router(parse_router_args(args + (['--control-plane-api-keys'] + keys if keys else [])))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
