# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the nccl_tuning role reads in the container, one call each (module gpuserve.sglang.nccl_tuning_info).

Private to this collection. `state`: the venv's Python and site-packages, whether systemd runs, and the files and
directories the role renders into. `proof`: the three proofs that the NCCL variables reach a process, each run
exactly as its own command would run it: the proof script (roles/nccl_tuning/files/nccl_env_proof.py, installed by
the role) under `env -i` with the venv's Python, which starts a 'spawn' child as SGLang does; systemd's reading of
the EnvironmentFile (`systemd-run ... /usr/bin/env`, when systemd runs); a clean login shell's `env`. The role judges
the results (filter nccl_env_missing). `run` is injected (argv -> Result, the shape of _runner.Result).
"""
from __future__ import annotations

import hashlib
import json
import os

INFO_ARGS = dict(
    read=dict(type='str', required=True, choices=['state', 'proof']),
    venv=dict(type='path', required=True),
    hook_module=dict(type='str', required=True),
    files=dict(type='list', elements='path', default=[]),
    dirs=dict(type='list', elements='path', default=[]),
    proof_script=dict(type='path'),
    expect=dict(type='dict'),
    env_file=dict(type='path'),
    systemd=dict(type='bool', default=False),
    command_timeout=dict(type='float', default=300.0),
)
INFO_REQUIRED_IF = [('read', 'proof', ('proof_script', 'expect', 'env_file'))]
PURELIB_PROBE = 'import sysconfig; print(sysconfig.get_path("purelib"))'


def command(res):
    """{rc, stdout, stderr} of a Result: stdout whole (the proofs print JSON or an environment), stderr's last 4,000
    characters."""
    return {'rc': res.rc, 'stdout': res.out, 'stderr': res.err[-4000:]}


def path_info(path, content=True):
    """{exists, isdir, mode, uid, gid} and, for a file when content is true, its sha1 (as Ansible's stat has it)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {'exists': False}
    out = {'exists': True, 'isdir': os.path.isdir(path), 'mode': '%04o' % (st.st_mode & 0o7777),
           'uid': st.st_uid, 'gid': st.st_gid}
    if content and not out['isdir']:
        with open(path, 'rb') as handle:
            out['sha1'] = hashlib.sha1(handle.read()).hexdigest()
    return out


def python_of(venv):
    return os.path.join(venv, 'bin', 'python')


def read_state(run, params, systemd_dir='/run/systemd/system'):
    """{python_exists, purelib (or purelib_error), systemd, files, dirs}: files are params['files'] and the hook's
    .py and .pth in the venv's site-packages."""
    python = python_of(params['venv'])
    result = {'python_exists': os.access(python, os.X_OK), 'purelib': None, 'files': {}, 'dirs': {},
              'systemd': os.path.isdir(systemd_dir)}
    if result['python_exists']:
        res = command(run([python, '-I', '-c', PURELIB_PROBE]))
        if res['rc'] == 0 and res['stdout'].strip():
            result['purelib'] = res['stdout'].strip()
        else:
            result['purelib_error'] = res
    paths = list(params['files'])
    if result['purelib']:
        paths += [os.path.join(result['purelib'], params['hook_module'] + suffix) for suffix in ('.py', '.pth')]
    for path in paths:
        result['files'][path] = path_info(path)
    for path in params['dirs']:
        result['dirs'][path] = path_info(path, content=False)
    return result


def proof_argvs(params):
    """{proof: argv} of the proofs to run."""
    argvs = {
        'spawn': ['/usr/bin/env', '-i', python_of(params['venv']), params['proof_script'],
                  '--expect', json.dumps(params['expect'], sort_keys=True),
                  '--module', params['hook_module']],
        'login': ['/usr/bin/env', '-i', '/bin/sh', '-l', '-c', 'env'],
    }
    if params['systemd']:
        argvs['systemd_env'] = ['systemd-run', '--quiet', '--wait', '--pipe', '--collect',
                                '--property=EnvironmentFile=' + params['env_file'], '/usr/bin/env']
    return argvs


def read_proof(run, params):
    """{spawn, login[, systemd_env]}: each proof's rc, stdout and stderr."""
    return {name: command(run(argv)) for name, argv in proof_argvs(params).items()}
