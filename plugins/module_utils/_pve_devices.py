# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU device nodes and the LXC devN entries that pass them into a container. Private to this collection.

Pure functions: discovery on a device root, parsing and printing PVE's devN property strings
(pve-container src/PVE/LXC/Config.pm, $dev_desc: [path=]<Path>[,deny-write=<1|0>][,gid=<int>][,mode=<octal>]
[,uid=<int>]), and the plan that takes a container's current entries to the wanted ones.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import stat

# What nvidia.ko, nvidia-uvm.ko and nvidia-modeset.ko create, in the order a human reads them.
DEFAULT_PATTERNS = ('nvidia[0-9]*', 'nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools', 'nvidia-modeset', 'nvidia-caps/*')
# pve-container allows dev0..dev255 ($MAX_DEVICES = 256).
MAX_DEVICES = 256
DEV_KEY = re.compile(r'^dev(\d+)$')
# A device path PVE will take and a shell cannot misread: absolute, under /dev, no option separators.
DEV_PATH = re.compile(r'^/dev/[A-Za-z0-9_.+@:-]+(/[A-Za-z0-9_.+@:-]+)*$')
MODE = re.compile(r'^0?[0-7]{3,4}$')
OPTION_KEYS = ('deny-write', 'gid', 'mode', 'uid')
GPU = re.compile(r'^/dev/nvidia(\d+)$')


class DeviceError(ValueError):
    """A device path or option that must not reach PVE."""


def natural_key(path):
    """nvidia2 before nvidia10; the default patterns' order for the rest."""
    base = path.rsplit('/', 1)[-1] if '/nvidia-caps/' not in path else 'nvidia-caps/' + path.rsplit('/', 1)[-1]
    m = re.match(r'^nvidia(\d+)$', base)
    if m:
        return (0, int(m.group(1)), base)
    order = ['nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools', 'nvidia-modeset']
    if base in order:
        return (1, order.index(base), base)
    m = re.match(r'^nvidia-caps/\D*(\d+)$', base)
    if m:
        return (2, int(m.group(1)), base)
    return (3, 0, base)


def _pattern_matches(root, pattern):
    import glob
    return glob.glob(os.path.join(root, pattern))


def discover(device_root='/dev', patterns=DEFAULT_PATTERNS, require_char=None):
    """Host paths of the GPU device nodes under device_root, in natural order.

    On /dev only character devices count (a stray regular file there is a mistake, not a GPU). Under another root
    (the lab's simulated GPUs are regular files) anything that is not a directory counts.
    """
    if require_char is None:
        require_char = os.path.normpath(device_root) == '/dev'
    found = set()
    for pattern in patterns:
        for path in _pattern_matches(device_root, pattern):
            try:
                st = os.stat(path)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                continue
            if require_char and not stat.S_ISCHR(st.st_mode):
                continue
            found.add(path)
    return sorted(found, key=natural_key)


def container_path(host_path, device_root='/dev'):
    """The /dev path a host device node has in the devN entry (the lab keeps its nodes outside /dev)."""
    root = os.path.normpath(device_root)
    path = os.path.normpath(host_path)
    if root != '/dev' and (path == root or path.startswith(root + '/')):
        path = '/dev/' + os.path.relpath(path, root)
    validate_path(path)
    return path


def validate_path(path):
    """Raise DeviceError unless path is an absolute device path under /dev (PVE itself accepts 'nvidia0')."""
    if not isinstance(path, str) or not DEV_PATH.match(path) or '/../' in path + '/' or '/./' in path + '/':
        raise DeviceError('device path {0!r} is not an absolute path under /dev (e.g. /dev/nvidia0)'.format(path))
    return path


def normalise_options(gid=None, uid=None, mode=None, deny_write=None):
    """The devN options as PVE stores them (strings), leaving out what is not set."""
    opts = {}
    if gid is not None:
        if int(gid) < 0:
            raise DeviceError('gid must be >= 0, got {0}'.format(gid))
        opts['gid'] = str(int(gid))
    if uid is not None:
        if int(uid) < 0:
            raise DeviceError('uid must be >= 0, got {0}'.format(uid))
        opts['uid'] = str(int(uid))
    if mode is not None:
        mode = str(mode)
        if not MODE.match(mode):
            raise DeviceError('mode must be an octal access mode such as 0666, got {0!r}'.format(mode))
        opts['mode'] = mode if len(mode) == 4 else '0' + mode
    if deny_write:
        opts['deny-write'] = '1'
    return opts


def parse_entry(value):
    """(path, {option: value}) of a devN value such as '/dev/nvidia0,gid=44,mode=0666'."""
    path, opts = None, {}
    for n, part in enumerate(str(value).split(',')):
        key, eq, val = part.partition('=')
        if not eq:
            if n == 0:
                path = part
            continue
        if key == 'path':
            path = val
        else:
            opts[key] = val
    if 'mode' in opts and len(opts['mode']) == 3:
        opts['mode'] = '0' + opts['mode']
    if opts.get('deny-write') in ('0', 'false'):
        del opts['deny-write']
    return path, opts


def print_entry(path, opts):
    """PVE's spelling: the path, then the options in alphabetical order."""
    return ','.join([path] + ['{0}={1}'.format(k, opts[k]) for k in sorted(opts)])


def current_entries(config):
    """{index: (path, opts)} of the devN keys of a container config."""
    out = {}
    for key, value in (config or {}).items():
        m = DEV_KEY.match(key)
        if m and value not in (None, ''):
            out[int(m.group(1))] = parse_entry(value)
    return out


def plan(config, wanted, opts, prune=False):
    """What to set and delete so the container passes exactly `wanted` (paths) with `opts`.

    Entries for other paths are kept, whatever they are. An entry for a wanted path keeps its slot; new paths take
    the lowest free slots. With prune, /dev/nvidiaN entries that are no longer wanted are deleted (a GPU that left
    the host). Returns dict(set={key: value}, delete=[keys], before={key: value}, after={key: value}).
    """
    current = current_entries(config)
    by_path = {}
    for idx in sorted(current):
        path = current[idx][0]
        by_path.setdefault(path, []).append(idx)
    sets, deletes = {}, []
    used = set(current)
    for path in wanted:
        validate_path(path)
        slots = by_path.get(path)
        if slots:
            keep = slots[0]
            if current[keep][1] != opts:
                sets['dev{0}'.format(keep)] = print_entry(path, opts)
            # The same node passed twice is a mistake (PVE refuses it on start): drop the duplicates.
            deletes.extend('dev{0}'.format(i) for i in slots[1:])
            continue
        free = next((i for i in range(MAX_DEVICES) if i not in used), None)
        if free is None:
            raise DeviceError('no free devN slot left for {0} (PVE allows dev0..dev{1})'.format(path, MAX_DEVICES - 1))
        used.add(free)
        sets['dev{0}'.format(free)] = print_entry(path, opts)
    if prune:
        wanted_set = set(wanted)
        for idx in sorted(current):
            path = current[idx][0]
            if path not in wanted_set and GPU.match(path or ''):
                deletes.append('dev{0}'.format(idx))
    before = dict(('dev{0}'.format(i), print_entry(*current[i])) for i in current)
    after = dict(before)
    after.update(sets)
    for key in deletes:
        after.pop(key, None)
    return {'set': sets, 'delete': sorted(set(deletes), key=lambda k: int(k[3:])), 'before': before, 'after': after}


def render(entries):
    """devN lines as `pct config` prints them, for the diff."""
    return ''.join('{0}: {1}\n'.format(k, entries[k]) for k in sorted(entries, key=lambda k: int(k[3:])))
