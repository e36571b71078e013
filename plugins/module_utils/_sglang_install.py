# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the sglang_install role reads in the container, one call each (module gpuserve.sglang.sglang_install_info).

Private to this collection. `state`: the inputs of every decision the role makes (the system packages, the tree,
the venv, the rendered files). `facts`: what the role publishes after the install (the tree, the SGLang version) and,
with `smoke`, the import check of sglang.srt.server_args in the venv, recorded so that it is not repeated while its
inputs hold. The tree is read by _git_tree, the one reader of "which commit, which changes"; the inputs of the
import check by _install_fingerprint, the one recipe (sglang_server's argument check keeps its record the same
way). `run` is injected (argv -> Result, the shape of _runner.Result); each command's status and output are reported,
never raised.
"""
from __future__ import annotations

import hashlib
import json
import os
import time

from ansible_collections.gpuserve.sglang.plugins.module_utils._git_tree import parse_status, status_argv
from ansible_collections.gpuserve.sglang.plugins.module_utils import _venv_probe
from ansible_collections.gpuserve.sglang.plugins.module_utils._install_fingerprint import (
    install_fingerprint, probe_argv, pyvenv_cfg_digest)
from ansible_collections.gpuserve.sglang.plugins.module_utils._python_script import script_argv

SMOKE_MODULE = 'sglang.srt.server_args'
TEXT_LIMIT = 65536  # a file under this size is returned with its text (the role compares rendered files)

INFO_ARGS = dict(
    read=dict(type='str', required=True, choices=['state', 'facts']),
    src=dict(type='path', required=True),
    venv=dict(type='path', required=True),
    pin=dict(type='str'),
    files=dict(type='list', elements='path', default=[]),
    system_packages=dict(type='list', elements='str', default=[]),
    packages=dict(type='list', elements='str', default=[]),
    constraints=dict(type='list', elements='str', default=[]),
    smoke=dict(type='bool', default=False),
    smoke_record=dict(type='path'),
    command_timeout=dict(type='float', default=600.0),
)
INFO_REQUIRED_IF = [('read', 'state', ('pin',))]

VERSION_PROBE = 'import importlib.metadata as m; print(m.version("sglang"))'


def command(res):
    """{rc, stdout, stderr} of a Result: output stripped, stderr's last 2,000 characters (a pip or import error's
    traceback ends with what matters)."""
    return {'rc': res.rc, 'stdout': res.out.strip(), 'stderr': res.err.strip()[-2000:]}


def file_info(path):
    """{exists, sha1 (as Ansible's stat computes it), mode, uid, gid, text (None at TEXT_LIMIT bytes or more)}."""
    try:
        st = os.stat(path)
        with open(path, 'rb') as handle:
            data = handle.read()
    except FileNotFoundError:
        return {'exists': False}
    text = data.decode('utf-8', 'replace') if len(data) < TEXT_LIMIT else None
    return {'exists': True, 'sha1': hashlib.sha1(data).hexdigest(), 'mode': '%04o' % (st.st_mode & 0o7777),
            'uid': st.st_uid, 'gid': st.st_gid, 'text': text}


def tree(run, src):
    """{rc, error, commit, changes, dirty} of the tree at src, as _git_tree reads it."""
    res = run(status_argv(src))
    return parse_status(res.rc, res.out, res.err)


def dpkg_installed(run, names):
    """{package: installed} from one dpkg-query (state 'ii')."""
    res = run(['dpkg-query', '-W', '-f=${Package}\t${db:Status-Abbrev}\n'] + list(names))
    states = dict(line.split('\t', 1) for line in res.out.splitlines() if '\t' in line)
    return {name: states.get(name, '').startswith('ii') for name in names}


def python_of(venv):
    return os.path.join(venv, 'bin', 'python')


def read_state(run, params):
    """The inputs of the role's decisions: {dpkg, git, venv, files}."""
    src, venv = params['src'], params['venv']
    result = {'dpkg': {}, 'git': {'exists': os.path.exists(os.path.join(src, '.git'))}, 'venv': {}, 'files': {}}
    if params['system_packages']:
        result['dpkg'] = dpkg_installed(run, params['system_packages'])
    if result['git']['exists']:
        result['git'].update(
            tree=tree(run, src),
            want=command(run(['git', '-C', src, 'rev-parse', '--verify', params['pin'] + '^{commit}'])),
            remote_url=command(run(['git', '-C', src, 'remote', 'get-url', 'origin'])),
        )
    python = python_of(venv)
    result['venv']['python_exists'] = os.access(python, os.X_OK)
    result['venv']['pyvenv_cfg'] = file_info(os.path.join(venv, 'pyvenv.cfg'))
    if result['venv']['python_exists']:
        probe = command(run(script_argv(python, _venv_probe, json.dumps(params['packages']),
                                        json.dumps(params['constraints']))))
        try:
            result['venv'].update(json.loads(probe['stdout']))
        except ValueError:
            result['venv']['error'] = probe
    for path in params['files']:
        result['files'][path] = file_info(path)
    return result


def read_record(path):
    try:
        with open(path, encoding='utf-8') as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def write_record(path, fingerprint, now):
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as handle:
        json.dump({'fingerprint': fingerprint, 'module': SMOKE_MODULE,
                   'proven_at': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(now))}, handle)
    os.replace(tmp, path)


def smoke(run, venv, record, the_tree, write, now):
    """The import of SMOKE_MODULE in the venv, as {rc, stdout, stderr}. With a record: skipped while the install's
    fingerprint equals the recorded one (then `cached_since` says since when); a pass with a fingerprint is recorded,
    a failure removes the record; `write` false (check mode) leaves the record as it is."""
    python = python_of(venv)
    argv = [python, '-I', '-c', 'import ' + SMOKE_MODULE]
    if not record:
        return command(run(argv))
    probe = run(probe_argv(python))
    fingerprint = install_fingerprint(the_tree, probe.rc, probe.out, pyvenv_cfg_digest(venv), SMOKE_MODULE)
    recorded = read_record(record)
    if fingerprint is not None and recorded.get('fingerprint') == fingerprint:
        return {'rc': 0, 'stdout': '', 'stderr': '', 'cached_since': recorded.get('proven_at')}
    result = command(run(argv))
    if not write:
        return result
    if result['rc'] == 0 and fingerprint is not None:
        write_record(record, fingerprint, now)
    elif os.path.exists(record):
        os.unlink(record)
    return result


def read_facts(run, params, write=True, now=None):
    """What the role publishes: {tree, version} and, with params['smoke'], {smoke}."""
    venv = params['venv']
    result = {'tree': tree(run, params['src']),
              'version': command(run([python_of(venv), '-I', '-c', VERSION_PROBE]))}
    if params['smoke']:
        result['smoke'] = smoke(run, venv, params['smoke_record'], result['tree'], write,
                                time.time() if now is None else now)
    return result
