# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the nvidia_userspace role reads, one call per machine (module gpuserve.sglang.nvidia_userspace_info), and
the two versions behind a Driver/library version mismatch (the container helper's gate, at every start).

Private to this collection. On the PVE host: the loaded kernel module's version; in the container: the .run
userspace's libraries and what its nvidia-smi answers. The comparison is the filter nvidia_userspace_plan, on the
controller. Every nvidia-smi argv comes from _nvidia_smi, the collection's one builder of them; `run` is injected
(argv -> Result, the shape of _runner.Result) so the reads are tested without a driver. Part of the container
helper's package (_helper_cli.PACKAGE): stdlib only at load.
"""
from __future__ import annotations

import fnmatch
import os

from ansible_collections.gpuserve.sglang.plugins.module_utils._nvidia_smi import (
    MISMATCH_RE, SmiError, list_query, parse_driver_version, parse_nvml_library_version, version_count_query)

PROC_VERSION = '/proc/driver/nvidia/version'
SCOPES = ('host', 'container')

INFO_ARGS = dict(
    scope=dict(type='str', required=True, choices=list(SCOPES)),
    lib_dir=dict(type='path', default='/usr/lib/x86_64-linux-gnu'),
    lib_pattern=dict(type='str', default='libnvidia-ml.so.*.*'),
    nvidia_smi=dict(type='str', default='nvidia-smi'),
    nvidia_smi_timeout=dict(type='float', default=120.0),
)


def command(res):
    """{rc, stdout, stderr} of a Result, trailing newlines dropped: what the role's filters and messages read."""
    return {'rc': res.rc, 'stdout': res.out.rstrip('\n'), 'stderr': res.err.rstrip('\n')}


def read_proc(proc_version=PROC_VERSION):
    """The text of /proc/driver/nvidia/version (the loaded kernel module; a container sees its host's), or None."""
    try:
        with open(proc_version, encoding='utf-8', errors='replace') as handle:
            return handle.read()
    except OSError:
        return None


def read_host(run, nvidia_smi, proc_version=PROC_VERSION):
    """{proc, smi}: the text of /proc/driver/nvidia/version; only when that cannot be read, the driver version and
    GPU count nvidia-smi reports (smi is None otherwise)."""
    proc = read_proc(proc_version)
    if proc is not None:
        return {'proc': proc, 'smi': None}
    return {'proc': None, 'smi': command(run(version_count_query(nvidia_smi)))}


def mismatch(smi_text, proc_text):
    """{host, userspace} when smi_text is nvidia-smi's Driver/library version mismatch: the loaded kernel module's
    version (from proc_text, /proc/driver/nvidia/version) and the userspace's (the NVML library version nvidia-smi
    names), each None where unread; None for any other text. After a driver update on the PVE host, a container's
    userspace still has the old version."""
    if not MISMATCH_RE.search(smi_text or ''):
        return None
    try:
        host = parse_driver_version(proc_text) if proc_text else None
    except SmiError:
        host = None
    return {'host': host, 'userspace': parse_nvml_library_version(smi_text)}


def libraries(lib_dir, pattern):
    """The regular files (not links) of lib_dir whose names match pattern, sorted; [] when lib_dir is unreadable."""
    try:
        names = sorted(os.listdir(lib_dir))
    except OSError:
        return []
    paths = [os.path.join(lib_dir, name) for name in names if fnmatch.fnmatch(name, pattern)]
    return [path for path in paths if os.path.isfile(path) and not os.path.islink(path)]


def read_container(run, nvidia_smi, lib_dir, pattern):
    """{libs, smi, list}: the userspace libraries, the driver version query and `nvidia-smi -L`."""
    return {'libs': libraries(lib_dir, pattern),
            'smi': command(run(version_count_query(nvidia_smi))),
            'list': command(run(list_query(nvidia_smi)))}


def read(params, run):
    """The read of params['scope'], with run(argv) -> Result."""
    if params['scope'] == 'host':
        return read_host(run, params['nvidia_smi'])
    return read_container(run, params['nvidia_smi'], params['lib_dir'], params['lib_pattern'])
