# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fingerprint of the SGLang install in a container: what a check that imports SGLang depends on, so that a
check which passed need not run again while its inputs hold. The one recipe for that fact.

Private to this collection, stdlib only, and it runs no command itself (as _git_tree.py): each side runs
probe_argv() its own way and hands the output to install_fingerprint(). It reaches the container twice: in the
payload of sglang_install_info (_sglang_install, the import check of sglang.srt.server_args), and as a file of the
container helper's package (`gpuserve-sglang validate-args`, the argument check).

The inputs: the tree's HEAD as _git_tree reads it, the venv's pyvenv.cfg, its Python's version and every
distribution's name and version. A tree with local changes has no fingerprint (its status lines do not capture
the files' contents), nor has a venv whose Python does not answer. Not seen: a file edited by hand inside
site-packages without a version change.
"""
import hashlib
import json
import os

from ansible_collections.gpuserve.sglang.plugins.module_utils import _fingerprint_probe
from ansible_collections.gpuserve.sglang.plugins.module_utils._python_script import script_argv


def probe_argv(python):
    """The one command: the venv's Python, isolated (-I: no user site, no PYTHON* variables), runs
    _fingerprint_probe, which lists the venv."""
    return script_argv(python, _fingerprint_probe)


def pyvenv_cfg_digest(venv):
    """sha1 of VENV/pyvenv.cfg (the base interpreter the venv runs on), or None when it cannot be read."""
    try:
        with open(os.path.join(venv, 'pyvenv.cfg'), 'rb') as handle:
            return hashlib.sha1(handle.read()).hexdigest()
    except OSError:
        return None


def install_fingerprint(tree, probe_rc, probe_out, pyvenv_cfg_sha1, module):
    """sha256 hex of the install's inputs for a check of `module`, or None (then the check always runs): when the
    tree could not be read, has no commit or has changes, or when the probe failed.

    tree: _git_tree.parse_status()'s result; probe_rc, probe_out: probe_argv()'s exit status and stdout."""
    if tree.get('rc') != 0 or tree.get('commit') is None or tree.get('changes'):
        return None
    if probe_rc != 0:
        return None
    inputs = {'module': module, 'head': tree['commit'], 'status': tree['changes'], 'venv': probe_out.strip(),
              'pyvenv_cfg': pyvenv_cfg_sha1}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
