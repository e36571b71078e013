#!/usr/bin/env python3
"""The lab's Proxmox VE API: fakepve (PyPI) on loopback, kept consistent with the lab's real LXC container.

SIMULATED: this is not Proxmox. fakepve answers every call as PVE 9 does (its schema checks every request,
its errors are PVE's wording), but it keeps its guests in memory. This launcher

- serves it with the lab's nodes (the first, --node, and every --other-node NAME=CONFDIR: one API for the cluster,
  as PVE's on any node), storages and Debian template, root@pam with a generated password and one API
  token, a self-signed certificate that clients use as their CA (no TLS checks switched off);
- runs the lab's real container operations from inside fakepve's own tasks: a successful vzcreate, vzdestroy,
  vzstart, vzstop/vzshutdown or vzreboot task calls `lab/lab ct-create|ct-destroy|ct-start|ct-stop VMID`; when the
  script fails, the task ends in `TASK ERROR` and fakepve's view is rolled back, so the two never disagree;
- writes every container's config, as PVE's /etc/pve/nodes/NODE/lxc/VMID.conf would read, to its node's conf dir
  (STATE/lxc/VMID.conf on the first node) before each hook, which it runs with GPUSERVE_PVE_NODE=NODE (the lab turns
  mp0 and devN into its own bind mounts from it), and keeps the guests and their nodes in STATE/guests.json across
  restarts, dropping those whose real container is gone;
- seeds an existing real container (VMID 101 by default) that fakepve does not know yet;
- answers an admin socket (STATE/admin.sock, root only) for fault injection and permissions: a locked container,
  a task that ends in error, a slow task, a request that gets no answer for a while, a grant (which turns fakepve's permission checks on);
- plays the node's `pct config|set|status|reboot` against the API as root@pam, which is what pct on a real node
  amounts to (the lab's /usr/sbin/pct can hand those subcommands to `pve_api.py pct`); the node is the one
  GPUSERVE_LAB_NODE names, else the first.

    pve_api.py start  --state-dir DIR [--port 8006] [--host 127.0.0.1] [--node lab-pve]
                      [--other-node NAME=CONFDIR ...]
    pve_api.py stop   --state-dir DIR
    pve_api.py status --state-dir DIR
    pve_api.py images --state-dir DIR    (list the lab's installed images, after lab/lab image save)
    pve_api.py fault  --state-dir DIR lock VMID [--lock backup] | unlock VMID | task-error METHOD PATH [...]
                                      | start-error VMID MESSAGE | slow VMID [--op start] [--secs 5]
                                      | hang METHOD PATH [--secs 30] [--times N] | clear
    pve_api.py grant  --state-dir DIR USERID PATH PRIV [PRIV...]
    pve_api.py pct    --state-dir DIR config VMID | status VMID | set VMID --devN VALUE [--delete KEYS] | reboot VMID
"""

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LAB_SCRIPT = os.path.join(HERE, 'lab')
TEMPLATE = 'debian-12-standard_12.7-1_amd64.tar.zst'
IMAGE_VOLUME = 'debian-12-gpuserve-lab-installed_1_amd64.tar.zst'  # lab/lab's IMAGE_VOLUME
TOKEN_NAME = 'gpuserve'
# Task types whose success the real container has to follow, and the lab commands that do it.
HOOKS = {'vzcreate': ('ct-create',), 'vzdestroy': ('ct-destroy',), 'vzstart': ('ct-start',),
         'vzstop': ('ct-stop',), 'vzshutdown': ('ct-stop',), 'vzreboot': ('ct-stop', 'ct-start')}
HOOK_TIMEOUT = {'ct-create': 900, 'ct-destroy': 300, 'ct-start': 180, 'ct-stop': 180}
START_WAIT = 30


def paths(state_dir):
    return {k: os.path.join(state_dir, v) for k, v in (
        ('pid', 'fakepve.pid'), ('log', 'fakepve.log'), ('creds', 'credentials.yml'), ('creds_json', '.credentials.json'),
        ('cert', 'fakepve.crt'), ('key', 'fakepve.key'), ('guests', 'guests.json'), ('sock', 'admin.sock'),
        ('lxc', 'lxc'))}


def write_private(path, text):
    """Write a file only its owner can read (the mode is set before any secret is written)."""
    fd = os.open(path + '.tmp', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'w') as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(text)
    os.replace(path + '.tmp', path)


def load_credentials(state_dir):
    with open(paths(state_dir)['creds_json']) as src:
        return json.load(src)


def credentials(state_dir, host, port, node):
    """The lab's credentials: kept across restarts so vaults and environments stay valid, generated once."""
    p = paths(state_dir)
    try:
        creds = load_credentials(state_dir)
    except (OSError, ValueError):
        creds = {'api_user': 'root@pam', 'api_password': secrets.token_urlsafe(18),
                 'api_token_id': TOKEN_NAME, 'api_token_secret': secrets.token_hex(16),
                 'admin_secret': secrets.token_hex(16)}
    creds.update(api_host=host, api_port=port, node=node, ca_path=p['cert'], validate_certs=True)
    write_private(p['creds_json'], json.dumps(creds, indent=1, sort_keys=True) + '\n')
    # The same, for ansible (-e @credentials.yml) and humans. Token ids are not secret; the token
    # secret and the password are.
    lines = ['# fakepve (SIMULATED Proxmox VE API) for the gpuserve lab; written by lab/pve_api.py. Secret: mode 0600.']
    for key in ('api_host', 'api_port', 'api_user', 'api_password', 'api_token_id', 'api_token_secret', 'ca_path',
                'validate_certs', 'node'):
        lines.append('{0}: {1}'.format(key, json.dumps(creds[key])))
    write_private(p['creds'], '\n'.join(lines) + '\n')
    return creds


# --------------------------------------------------------------------- server side

def pve_conf(ct):
    """The container's config as PVE writes /etc/pve/lxc/VMID.conf (pending changes are not part of it)."""
    cfg = dict(ct.config)
    lines = []
    if cfg.get('description'):
        lines += ['#' + line for line in str(cfg.pop('description')).splitlines()]
    cfg.pop('description', None)
    lines += ['{0}: {1}'.format(k, cfg[k]) for k in sorted(cfg)]
    return '\n'.join(lines) + '\n'


def parse_conf(text):
    """A PVE-style container config file as a dict (the [pve:pending] and snapshot sections left out)."""
    cfg, desc = {}, []
    for line in text.splitlines():
        if line.startswith('['):
            break
        if line.startswith('#'):
            desc.append(line[1:])
            continue
        key, sep, value = line.partition(': ')
        if sep and key.strip():
            cfg[key.strip()] = value.strip()
    if desc:
        cfg['description'] = '\n'.join(desc)
    for key in ('cores', 'memory', 'swap', 'onboot', 'unprivileged'):
        if key in cfg and cfg[key].isdigit():
            cfg[key] = int(cfg[key])
    return cfg


def _ct_state_of(returncode, stdout):
    if returncode != 0 or not stdout.strip():
        return None
    return 'running' if stdout.strip().upper() == 'RUNNING' else 'stopped'


def real_ct_state(vmid):
    """'running'/'stopped' for an existing real LXC container named VMID, None when there is none."""
    if shutil.which('lxc-info') is None:
        return None
    try:
        out = subprocess.run(['lxc-info', '-n', str(vmid), '-sH'], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return _ct_state_of(out.returncode, out.stdout)


UNKNOWN = 'unknown'
STATE_WAIT = 1


async def real_ct_state_async(vmid, wait=STATE_WAIT):
    """real_ct_state without blocking the server; UNKNOWN when lxc-info does not answer within `wait` seconds.

    lxc-info waits for the container's lock, which lxc-destroy holds while it deletes the root filesystem
    (seconds): called inline, it stalled every request, and clients with 5 s timeouts (proxmoxer's default)
    gave up while polling the destroy task."""
    if shutil.which('lxc-info') is None:
        return None
    try:
        proc = await asyncio.create_subprocess_exec('lxc-info', '-n', str(vmid), '-sH', stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), wait)
    except asyncio.TimeoutError:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        await proc.wait()
        return UNKNOWN
    return _ct_state_of(proc.returncode, out.decode(errors='replace'))


def image_volumes(images_dir):
    """{volume name: size} of the lab's installed images (lab/lab image save): IMAGES/NAME/rootfs and its `source`
    note; their vztmpl volume is the lab's (lab/lab IMAGE_VOLUME) for the one image it makes, `installed`."""
    found = {}
    if images_dir and os.path.isdir(os.path.join(images_dir, 'installed', 'rootfs')):
        found[IMAGE_VOLUME] = 3 * 1024 ** 3
    return found


def register_images(pve, images_dir):
    """List the lab's images as templates of storage local (as an operator's own template after vzdump)."""
    names = image_volumes(images_dir)
    for name, size in names.items():
        pve.store_file('local', name, size, content='vztmpl')
    return sorted(names)


def make_server(args, creds):
    # Imported here: `stop`, `status` and the clients need nothing but the standard library.
    from fakepve.lxc import FakeCt
    from fakepve.model import TaskError
    from fakepve.server import FakePve
    from aiohttp import web

    p = paths(args.state_dir)
    conf_dirs = node_conf_dirs(args)
    hook_script = None if args.no_hooks else (args.lab_script if os.access(args.lab_script, os.X_OK) else None)

    def conf_path(ct):
        return os.path.join(conf_dirs[ct.node], '{0}.conf'.format(ct.vmid))

    class LabPve(FakePve):
        """fakepve whose container tasks also move the lab's real container."""

        async def _hook(self, ct, commands, record):
            # While the lab script moves the real container, its state and conf file are in flux: sync_from_disk
            # leaves the vmid alone (a destroy has already dropped it from fakepve; lxc-info would still see it).
            moving = self.__dict__.setdefault('_moving', set())
            moving.add(ct.vmid)
            try:
                await self._run_hook(ct, commands, record)
            finally:
                moving.discard(ct.vmid)

        async def _run_hook(self, ct, commands, record):
            self.write_conf(ct)
            if hook_script is None:
                record['log'].append('lab: no executable {0}: fakepve only, no real container'.format(args.lab_script))
                return
            env = dict(os.environ, GPUSERVE_PVE_CONF=conf_path(ct), GPUSERVE_PVE_NODE=ct.node,
                       # PVE's create unpacks the template it was given; the lab copies its image for its own
                       GPUSERVE_PVE_OSTEMPLATE=self.__dict__.get('_ostemplates', {}).get(ct.vmid, ''))
            for cmd in commands:
                argv = [hook_script, cmd, str(ct.vmid)]
                proc = await asyncio.create_subprocess_exec(*argv, env=env, stdout=asyncio.subprocess.PIPE,
                                                            stderr=asyncio.subprocess.STDOUT)
                try:
                    out, _ = await asyncio.wait_for(proc.communicate(), HOOK_TIMEOUT[cmd])
                except asyncio.TimeoutError:
                    proc.kill()
                    await proc.wait()
                    raise TaskError('lab: {0} timed out after {1}s'.format(' '.join(argv), HOOK_TIMEOUT[cmd]))
                text = out.decode(errors='replace').strip().splitlines()
                record['log'].extend('lab: ' + line for line in text[-20:])
                if proc.returncode != 0:
                    last = text[-1] if text else 'no output'
                    raise TaskError('lab: {0} failed (exit {1}): {2}'.format(' '.join(argv), proc.returncode, last))

        async def _lxc_create(self, user, v):
            # the template is a create-only option: PVE keeps it in no config, so the create hook is told it
            self.__dict__.setdefault('_ostemplates', {})[int(v['vmid'])] = v.get('ostemplate', '')
            return await super()._lxc_create(user, v)

        async def _answer(self, request, handler, generic, path_node):
            # The lab's `hang` fault: requests METHOD ...PATH get no answer for SECS (PVE behind a stuck proxy, or
            # pveproxy waiting on a hung cluster filesystem), then are handled as usual: a change a client gave up
            # on is applied late, as PVE would. fakepve 0.5.0's own hang_rate hits every request, login included.
            for key, rule in list(self.__dict__.setdefault('hangs', {}).items()):
                if request.method == key[0] and self._failure_matches(request, generic, key[1]):
                    if rule['times'] is not None:
                        rule['times'] -= 1
                        if rule['times'] <= 0:
                            del self.hangs[key]
                    await asyncio.sleep(rule['secs'])
            return await super()._answer(request, handler, generic, path_node)

        def _record_of(self, ttype, tid, claimed):
            """The log record of the task whose body is starting (the newest unclaimed running one of its kind)."""
            for record in reversed(self.tasklog):
                if record['type'] == ttype and record['id'] == str(tid) and record['status'] == 'running' \
                        and id(record) not in claimed:
                    claimed.add(id(record))
                    return record
            return {'log': []}

        async def task(self, node, ttype, tid, user, body, vm=None, lock=True, log=()):
            if ttype not in HOOKS or not isinstance(vm, FakeCt):
                return await super().task(node, ttype, tid, user, body, vm=vm, lock=lock, log=log)
            ct = vm
            claimed = self.__dict__.setdefault('_claimed', set())

            async def hooked():
                record = self._record_of(ttype, tid, claimed)
                note = await body()
                commands = HOOKS[ttype]
                if ttype == 'vzcreate' and ct.status == 'running':
                    commands = commands + ('ct-start',)
                try:
                    await self._hook(ct, commands, record)
                except TaskError:
                    # Roll fakepve back to what the real container is.
                    if ttype == 'vzcreate':
                        self._drop(ct)
                    elif ttype == 'vzdestroy':
                        ct.lock = None
                        if ct not in self.cts:
                            self.cts.append(ct)
                    elif ttype in ('vzstart', 'vzreboot'):
                        ct.status, ct.pid = 'stopped', None
                    elif ttype in ('vzstop', 'vzshutdown'):
                        ct.status = 'running'
                    raise
                finally:
                    self.persist()
                return note
            return await super().task(node, ttype, tid, user, hooked, vm=vm, lock=lock, log=log)

        async def _update_config(self, ct, user, values, deletes, reverts):
            try:
                await super()._update_config(ct, user, values, deletes, reverts)
            finally:
                self.persist()

        def write_conf(self, ct):
            """The CT's config in its node's conf dir (only there: a CT lives on one node)."""
            path = conf_path(ct)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            text = pve_conf(ct)
            with open(path, 'w') as out:
                out.write(text)
            for node, directory in conf_dirs.items():
                if node != ct.node and os.path.exists(os.path.join(directory, '{0}.conf'.format(ct.vmid))):
                    os.unlink(os.path.join(directory, '{0}.conf'.format(ct.vmid)))
            self.__dict__.setdefault('_written', {})[ct.vmid] = text

        async def sync_from_disk(self):
            """The nodes' conf dirs are the lab's /etc/pve/nodes/NODE/lxc: the lab's pct edits them and
            starts/stops the real container itself. Take what changed there (config, new or vanished containers,
            run state, the node whose dir has the file) before answering.
            Containers a task is moving are left alone, and so is one whose lxc-info does not answer in time."""
            if args.no_hooks or self.__dict__.get('_syncing'):
                return
            now = time.time()
            if now - self.__dict__.get('_synced', 0) < 0.3:
                return
            self._synced, self._syncing = now, True
            try:
                await self._sync_from_disk()
            finally:
                self._syncing = False

        def _busy(self, vmid):
            ct = self.ct(vmid)
            return vmid in self.__dict__.get('_moving', ()) or (ct is not None and ct.lock_holder is not None)

        async def _sync_from_disk(self):
            written = self.__dict__.setdefault('_written', {})
            on_disk = read_conf_dirs(conf_dirs)  # vmid: (node, text)
            cts = [ct for ct in self.cts if not self._busy(ct.vmid)]  # a task is moving the others right now
            states = await asyncio.gather(*(real_ct_state_async(ct.vmid) for ct in cts))
            for ct, real in zip(cts, states):
                if real == UNKNOWN or self._busy(ct.vmid) or ct not in self.cts:
                    continue  # no answer in time, or a task took it meanwhile: next request's sync
                node, text = on_disk.get(ct.vmid, (ct.node, None))
                if text is None and real is None:
                    self._drop(ct)
                    continue
                ct.node = node
                if text is not None and text != written.get(ct.vmid):
                    ct.config = parse_conf(text)
                    ct.pending = {}
                    written[ct.vmid] = text
                if real is not None and real != ct.status:
                    ct.status = real
                    ct.pid = next(self._ct_pids) if real == 'running' else None
                    ct.started_at = time.time() if real == 'running' else None
            for vmid, (node, text) in on_disk.items():
                if self.ct(vmid) is not None or self._busy(vmid):
                    continue
                real = await real_ct_state_async(vmid)
                if real in (None, UNKNOWN) or self.ct(vmid) is not None or self._busy(vmid):
                    continue
                cfg = parse_conf(text)
                cfg['tags'] = ';'.join(sorted(set(filter(None, str(cfg.get('tags', '')).split(';'))) | {'gpuserve'}))
                self.add_ct(vmid, node=node, status=real, config=cfg, defaults=False)
                self.write_conf(self.ct(vmid))

        @web.middleware
        async def _middleware(self, request, handler):
            await self.sync_from_disk()
            return await super()._middleware(request, handler)

        def persist(self):
            data = {str(ct.vmid): {'node': ct.node, 'status': ct.status, 'config': ct.config, 'pending': ct.pending}
                    for ct in self.cts}
            tmp = p['guests'] + '.tmp'
            with open(tmp, 'w') as out:
                json.dump(data, out, indent=1, sort_keys=True)
            os.replace(tmp, p['guests'])
            for directory in conf_dirs.values():
                os.makedirs(directory, exist_ok=True)
            known = set()
            for ct in self.cts:
                known.add(conf_path(ct))
                self.write_conf(ct)
            for directory in conf_dirs.values():
                for name in os.listdir(directory):
                    if name.endswith('.conf') and os.path.join(directory, name) not in known:
                        os.unlink(os.path.join(directory, name))

    pve = LabPve(user='root@pam', password=creds['api_password'], host=args.host, port=args.port)
    pve.time_scale = args.time_scale
    pve.nodes = {node: {'online': True} for node in conf_dirs}
    pve.cluster_name = 'gpuserve-lab'
    # community.proxmox and proxmoxer name a token by its user (api_user) and its name (api_token_id).
    pve.apitokens['{0}!{1}'.format(creds['api_user'], creds['api_token_id'])] = creds['api_token_secret']
    pve.store_file('local', TEMPLATE, 129 * 1024 ** 2, content='vztmpl')
    register_images(pve, args.images_dir)
    # A directory storage for rootfs as well (real PVE's "local" takes rootdir too when configured so).
    pve.storages['local']['content'] = 'iso,vztmpl,backup,rootdir'

    return pve


def node_conf_dirs(args):
    """{node: its conf dir}: the first node's is STATE/lxc, the others' come from --other-node NAME=CONFDIR."""
    dirs = {args.node: paths(args.state_dir)['lxc']}
    for item in args.other_node or ():
        name, sep, directory = item.partition('=')
        if not (sep and name and directory) or name in dirs:
            raise SystemExit('--other-node {0!r}: want NAME=CONFDIR, a node other than {1}'.format(item, sorted(dirs)))
        dirs[name] = os.path.abspath(directory)
    return dirs


def read_conf_dirs(conf_dirs):
    """{vmid: (node, text)} of the config files in the nodes' conf dirs (a vmid is unique in the cluster: the first
    node listing one keeps it)."""
    found = {}
    for node, directory in conf_dirs.items():
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            if name.endswith('.conf') and name[:-5].isdigit() and int(name[:-5]) not in found:
                with open(os.path.join(directory, name)) as src:
                    found[int(name[:-5])] = (node, src.read())
    return found


def restore_guests(pve, args):
    """Guests from the last run that still exist (config file or real container; all without hooks), then seeds."""
    p, conf_dirs = paths(args.state_dir), node_conf_dirs(args)
    try:
        with open(p['guests']) as src:
            saved = json.load(src)
    except (OSError, ValueError):
        saved = {}
    hooks = not args.no_hooks and os.access(args.lab_script, os.X_OK)
    for vmid, item in sorted(saved.items(), key=lambda kv: int(kv[0])):
        node = item.get('node') or args.node
        if node not in conf_dirs:
            print('lab: CT {0} was on node {1}, which this fakepve does not serve: left out'.format(vmid, node),
                  flush=True)
            continue
        real = real_ct_state(vmid)
        # The conf dirs are the lab's /etc/pve/nodes/NODE/lxc: lab/lab ct-destroy removes the file, so a guest with
        # neither a config file nor a real container is gone.
        if hooks and real is None and not os.path.exists(os.path.join(conf_dirs[node], '{0}.conf'.format(vmid))):
            continue
        ct = pve.add_ct(int(vmid), node=node, status=real or item.get('status', 'stopped'),
                        config=item['config'], pending=item.get('pending'), defaults=False)
        ct.config.pop('lock', None)
    on_disk = read_conf_dirs(conf_dirs)
    for vmid in args.seed:
        real = real_ct_state(vmid)
        if real is None or pve.ct(vmid) is not None:
            continue
        if vmid in on_disk:
            # The lab wrote its own /etc/pve-style config when it made the container: that is the truth.
            node, text = on_disk[vmid]
            cfg = parse_conf(text)
            cfg['tags'] = ';'.join(sorted(set(filter(None, str(cfg.get('tags', '')).split(';'))) | {'gpuserve'}))
            pve.add_ct(vmid, node=node, status=real, config=cfg, defaults=False)
            continue
        pve.add_ct(vmid, node=args.node, status=real, config={
            'hostname': 'ct{0}'.format(vmid), 'ostype': 'debian', 'arch': 'amd64', 'cores': 2, 'memory': 2048,
            'swap': 512, 'rootfs': 'local-lvm:vm-{0}-disk-0,size=8G'.format(vmid), 'unprivileged': 0,
            'tags': 'gpuserve', 'description': 'seeded by lab/pve_api.py from the existing real container'},
            defaults=False)
    pve.persist()


class Admin(object):
    """Fault injection and permissions, on a Unix socket only root can open. One JSON request per line."""

    def __init__(self, pve, node, images_dir=None):
        self.pve = pve
        self.node = node
        self.images_dir = images_dir

    def ct(self, vmid):
        ct = self.pve.ct(int(vmid))
        if ct is None:
            raise ValueError('no container {0} in fakepve'.format(vmid))
        return ct

    async def handle(self, req):
        pve, op = self.pve, req.get('op')
        if op == 'ping':
            return {'ok': True, 'url': pve.url}
        if op == 'state':
            return {'cts': {str(ct.vmid): {'node': ct.node, 'status': ct.status, 'config': ct.config,
                                           'pending': ct.pending} for ct in pve.cts},
                    'tasks': [dict((k, v) for k, v in t.items()) for t in pve.tasklog[-int(req.get('tasks', 20)):]],
                    'acl': None if pve.acl is None else {u: [[p, sorted(s)] for p, s in e] for u, e in pve.acl.items()},
                    'failures': ['{0} {1}'.format(*k) for k in pve.failures], 'time_scale': pve.time_scale}
        if op == 'lock':
            # A config lock as a backup or an interrupted snapshot leaves it: every change fails with 'CT is locked'.
            pve.snapshot_lock(int(req['vmid']), req.get('lock', 'backup'))
            return {'ok': True}
        if op == 'unlock':
            pve.unlock(int(req['vmid']))
            return {'ok': True}
        if op == 'hold-lock':
            # Another task holds the config lock (PVE waits lock_wait seconds, then "can't lock file").
            await pve.hold_config_lock(int(req['vmid']), req.get('secs'))
            return {'ok': True}
        if op == 'task-error':
            # The request answers with a UPID and the task ends in TASK ERROR (or plain HTTP error with status).
            if req.get('status'):
                pve.fail(req['method'], req['path'], status=int(req['status']), message=req['message'],
                         times=req.get('times'))
            elif req.get('error'):
                pve.fail(req['method'], req['path'], error=req['error'], times=req.get('times'))
            else:
                ct = self.ct(req['vmid'])
                ct.start_error = req.get('message') or 'lab: injected start failure'
            return {'ok': True}
        if op == 'start-error':
            self.ct(req['vmid']).start_error = req['message']
            return {'ok': True}
        if op == 'hang':
            pve.__dict__.setdefault('hangs', {})[(req['method'], req['path'])] = {
                'secs': float(req.get('secs') or 30), 'times': req.get('times')}
            return {'ok': True}
        if op == 'slow':
            # Tasks take `secs` real seconds: time_scale becomes 1 (PVE second = real second) until 'clear'.
            secs = float(req.get('secs', 5))
            if not pve.time_scale:
                pve.time_scale = 1.0
            what = req.get('op_name', 'start')
            if req.get('vmid') is not None and what in ('start', 'stop', 'shutdown'):
                setattr(self.ct(req['vmid']), what + '_secs', secs / pve.time_scale)
            else:
                pve.ct_secs[what] = secs / pve.time_scale
            return {'ok': True}
        if op == 'clear':
            pve.failures.clear()
            pve.__dict__.get('hangs', {}).clear()
            pve.time_scale = self.base_time_scale
            for key in pve.ct_secs:
                pve.ct_secs[key] = 0
            for ct in pve.cts:
                ct.start_error = None
                ct.start_secs = ct.stop_secs = ct.shutdown_secs = 0
                if ct.lock in ('backup', 'snapshot', 'snapshot-delete', 'rollback', 'migrate', 'disk'):
                    ct.lock = None
                pve.release(ct, 'scenario')
            if req.get('acl'):
                pve.acl = None
            return {'ok': True}
        if op == 'grant':
            pve.grant(req['user'], req['path'], *req['privs'])
            return {'ok': True}
        if op == 'images':
            # lab/lab image save made or replaced an image: list it
            return {'ok': True, 'images': register_images(pve, self.images_dir)}
        if op == 'token':
            # Another API token (e.g. a non-root user's), for permission tests.
            pve.apitokens[req['tokenid']] = req['secret']
            return {'ok': True}
        raise ValueError('unknown admin op {0!r}'.format(op))

    async def serve_client(self, reader, writer):
        try:
            line = await reader.readline()
            try:
                answer = await self.handle(json.loads(line))
            except Exception as exc:  # noqa: BLE001 - the error goes back to the caller
                answer = {'ok': False, 'error': '{0}: {1}'.format(type(exc).__name__, exc)}
            writer.write((json.dumps(answer, default=str) + '\n').encode())
            await writer.drain()
        finally:
            writer.close()


async def serve(args):
    p = paths(args.state_dir)
    creds = load_credentials(args.state_dir)
    pve = make_server(args, creds)
    restore_guests(pve, args)
    await pve.start(p['cert'], p['key'])
    admin = Admin(pve, args.node, args.images_dir)
    admin.base_time_scale = args.time_scale
    if os.path.exists(p['sock']):
        os.unlink(p['sock'])
    old = os.umask(0o077)
    try:
        server = await asyncio.start_unix_server(admin.serve_client, path=p['sock'])
    finally:
        os.umask(old)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print('fakepve (SIMULATED PVE API) listening on {0}, nodes {1}, hooks: {2}'.format(
        pve.url, ', '.join(sorted(pve.nodes)), 'off' if args.no_hooks else args.lab_script), flush=True)
    await stop.wait()
    server.close()
    pve.persist()
    await pve.stop()
    if os.path.exists(p['sock']):
        os.unlink(p['sock'])


# --------------------------------------------------------------------- client side

def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_pid(state_dir):
    try:
        with open(paths(state_dir)['pid']) as src:
            pid = int(src.read().strip())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) else None


def admin_call(state_dir, request, timeout=30):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(paths(state_dir)['sock'])
        sock.sendall((json.dumps(request) + '\n').encode())
        data = b''
        while not data.endswith(b'\n'):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        sock.close()
    answer = json.loads(data or b'{}')
    if not answer.get('ok', 'cts' in answer):
        raise SystemExit('fakepve admin: {0}'.format(answer.get('error', answer)))
    return answer


def tls_ready(host, port, cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    try:
        with socket.create_connection((host, port), timeout=2) as raw:
            with ctx.wrap_socket(raw, server_hostname=host):
                return True
    except (OSError, ssl.SSLError):
        return False


def cmd_start(args):
    p = paths(args.state_dir)
    os.makedirs(args.state_dir, mode=0o700, exist_ok=True)
    pid = read_pid(args.state_dir)
    if pid:
        print('fakepve already running (pid {0}); credentials in {1}'.format(pid, p['creds']))
        return 0
    node_conf_dirs(args)  # a bad --other-node fails here, not in the server
    creds = credentials(args.state_dir, args.host, args.port, args.node)
    if not (os.path.exists(p['cert']) and os.path.exists(p['key'])):
        from fakepve.certs import make_cert
        make_cert(args.state_dir, name='fakepve', hosts=(args.host,))
    argv = [sys.executable, os.path.abspath(__file__), 'serve', '--state-dir', args.state_dir, '--host', args.host,
            '--port', str(args.port), '--node', args.node, '--time-scale', str(args.time_scale),
            '--lab-script', args.lab_script] + (['--no-hooks'] if args.no_hooks else []) + \
        (['--images-dir', args.images_dir] if args.images_dir else [])
    for item in args.other_node or ():
        argv += ['--other-node', item]
    for vmid in args.seed:
        argv += ['--seed', str(vmid)]
    with open(p['log'], 'ab') as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    with open(p['pid'], 'w') as out:
        out.write('{0}\n'.format(proc.pid))
    deadline = time.time() + START_WAIT
    while time.time() < deadline:
        if proc.poll() is not None:
            tail = open(p['log'], errors='replace').read().splitlines()[-15:]
            os.unlink(p['pid'])
            print('fakepve did not start (exit {0}); {1}:\n{2}'.format(proc.returncode, p['log'], '\n'.join(tail)),
                  file=sys.stderr)
            return 1
        if tls_ready(args.host, args.port, p['cert']) and os.path.exists(p['sock']):
            print('fakepve (SIMULATED PVE API) on https://{0}:{1} nodes {2}, pid {3}; credentials in {4}'.format(
                args.host, args.port, ', '.join(node_conf_dirs(args)), proc.pid, p['creds']))
            return 0
        time.sleep(0.1)
    print('fakepve did not answer on {0}:{1} within {2}s; see {3}'.format(args.host, args.port, START_WAIT, p['log']),
          file=sys.stderr)
    return 1


def cmd_stop(args):
    p = paths(args.state_dir)
    pid = read_pid(args.state_dir)
    if pid is None:
        if os.path.exists(p['pid']):
            os.unlink(p['pid'])
        print('fakepve not running')
        return 0
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if not pid_alive(pid):
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
    if os.path.exists(p['pid']):
        os.unlink(p['pid'])
    print('fakepve stopped (pid {0})'.format(pid))
    return 0


def cmd_status(args):
    pid = read_pid(args.state_dir)
    if pid is None:
        print('fakepve: not running')
        return 3
    state = admin_call(args.state_dir, {'op': 'state', 'tasks': 5})
    creds = load_credentials(args.state_dir)
    print('fakepve (SIMULATED PVE API): pid {0}, https://{1}:{2}, node {3}'.format(
        pid, creds['api_host'], creds['api_port'], creds['node']))
    for vmid, ct in sorted(state['cts'].items()):
        where = '' if ct['node'] == creds['node'] else ' (node {0})'.format(ct['node'])
        lock = ' (locked: {0})'.format(ct['config']['lock']) if ct['config'].get('lock') else ''
        print('  CT {0}: {1}{2}{3}'.format(vmid, ct['status'], where, lock))
    return 0


def cmd_fault(args):
    req = {'op': args.kind}
    if args.kind in ('lock', 'unlock', 'start-error', 'slow', 'hold-lock'):
        req['vmid'] = args.vmid
    if args.kind == 'lock':
        req['lock'] = args.lock
    elif args.kind == 'hold-lock':
        req['secs'] = args.secs
    elif args.kind == 'start-error':
        req['message'] = args.message
    elif args.kind == 'slow':
        req.update(secs=args.secs, op_name=args.op)
    elif args.kind == 'task-error':
        req.update(method=args.method, path=args.path, message=args.message, error=args.error,
                   status=args.status, times=args.times)
    elif args.kind == 'hang':
        req.update(method=args.method, path=args.path, secs=args.secs, times=args.times)
    elif args.kind == 'clear':
        req['acl'] = args.acl
    admin_call(args.state_dir, req)
    print('fakepve fault: {0} set'.format(args.kind))
    return 0


def cmd_images(args):
    print(' '.join(admin_call(args.state_dir, {'op': 'images'})['images']))
    return 0


def cmd_grant(args):
    admin_call(args.state_dir, {'op': 'grant', 'user': args.userid, 'path': args.path, 'privs': args.privs})
    print('fakepve: granted {0} on {1} to {2} (permission checks are on now)'.format(
        ','.join(args.privs), args.path, args.userid))
    return 0


def api(state_dir):
    """The API as root@pam, and the node pct runs on: GPUSERVE_LAB_NODE (the second node's sshd sets it), else the
    first node."""
    from proxmoxer import ProxmoxAPI
    creds = load_credentials(state_dir)
    return ProxmoxAPI(creds['api_host'], port=creds['api_port'], user='root@pam', password=creds['api_password'],
                      verify_ssl=creds['ca_path'], timeout=30), os.environ.get('GPUSERVE_LAB_NODE') or creds['node']


def wait_task(prox, node, upid, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = prox.nodes(node).tasks(upid).status.get()
        if status.get('status') == 'stopped':
            if status.get('exitstatus') != 'OK':
                raise RuntimeError(status.get('exitstatus'))
            return
        time.sleep(0.2)
    raise RuntimeError('task {0} still running after {1}s'.format(upid, timeout))


def cmd_pct(args, extra):
    """pct on the node, as root: PVE's own CLI does the same API calls without the HTTP permission layer."""
    prox, node = api(args.state_dir)
    ct = prox.nodes(node).lxc(args.vmid)
    try:
        if args.sub == 'config':
            cfg = ct.config.get(current=1) if '--current' in extra else ct.config.get()
            cfg.pop('digest', None)
            for line in str(cfg.pop('description', '') or '').splitlines():
                print('#' + line)
            for key in sorted(cfg):
                print('{0}: {1}'.format(key, cfg[key]))
        elif args.sub == 'status':
            print('status: {0}'.format(ct.status.current.get()['status']))
        elif args.sub == 'reboot':
            wait_task(prox, node, ct.status.reboot.post())
        elif args.sub in ('start', 'stop', 'shutdown'):
            wait_task(prox, node, getattr(ct.status, args.sub).post())
        elif args.sub == 'set':
            values, key = {}, None
            for item in extra:
                if item.startswith('--'):
                    key = item[2:]
                    continue
                if key is None:
                    raise SystemExit('pct set: value {0!r} without an option'.format(item))
                values[key] = item
                key = None
            if key is not None:
                raise SystemExit('pct set: option --{0} needs a value'.format(key))
            if not values:
                raise SystemExit('pct set: no options specified')
            ct.config.put(**values)
        else:
            raise SystemExit('pct: unknown subcommand {0}'.format(args.sub))
    except RuntimeError as exc:
        print(str(exc), file=sys.stderr)
        return 255
    except Exception as exc:  # noqa: BLE001 - proxmoxer's ResourceException carries PVE's message
        print(str(exc).strip(), file=sys.stderr)
        return 255
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog='pve_api.py', description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='cmd', required=True)

    def add(name, **kw):
        sp = sub.add_parser(name, **kw)
        sp.add_argument('--state-dir', required=True)
        return sp
    for name in ('start', 'serve'):
        sp = add(name)
        sp.add_argument('--host', default='127.0.0.1')
        sp.add_argument('--port', type=int, default=8006)
        sp.add_argument('--node', default='lab-pve', help='the first node (its conf dir: STATE/lxc)')
        sp.add_argument('--other-node', action='append', metavar='NAME=CONFDIR',
                        help="another node of the cluster and its conf dir (PVE's /etc/pve/nodes/NAME/lxc)")
        # Above 0, tasks run after the request returns (as in PVE): the lab's container hooks take seconds and
        # clients wait for the UPID with short timeouts. Task durations are 0 PVE seconds unless a fault says so.
        sp.add_argument('--time-scale', type=float, default=0.01,
                        help='real seconds per PVE second (default 0.01); 0 runs tasks inside the request')
        sp.add_argument('--lab-script', default=LAB_SCRIPT, help='run as SCRIPT ct-create|... VMID (default lab/lab)')
        sp.add_argument('--no-hooks', action='store_true', help='fakepve only: never touch a real container')
        sp.add_argument('--seed', type=int, action='append', default=None,
                        help='seed these vmids from existing real containers (default 101)')
        sp.add_argument('--images-dir', help="the lab's installed images (lab/lab image save), listed as templates")
    add('stop')
    add('status')
    add('images')
    sp = add('fault')
    fsub = sp.add_subparsers(dest='kind', required=True)
    f = fsub.add_parser('lock', help="leave the CT locked ('CT is locked (backup)')")
    f.add_argument('vmid', type=int)
    f.add_argument('--lock', default='backup')
    f = fsub.add_parser('unlock')
    f.add_argument('vmid', type=int)
    f = fsub.add_parser('hold-lock', help="another task holds the config lock (\"can't lock file\")")
    f.add_argument('vmid', type=int)
    f.add_argument('--secs', type=float, default=None)
    f = fsub.add_parser('start-error', help='the next vzstart task of the CT ends in TASK ERROR: MESSAGE')
    f.add_argument('vmid', type=int)
    f.add_argument('message')
    f = fsub.add_parser('slow', help='the CT op (start, stop, shutdown) or task (create, destroy) takes SECS')
    f.add_argument('vmid', type=int)
    f.add_argument('--op', default='start')
    f.add_argument('--secs', type=float, default=5)
    f = fsub.add_parser('task-error', help='requests METHOD ...PATH fail: a task ending in error (--error NAME), or'
                                           ' an HTTP error (--status N --message M)')
    f.add_argument('method')
    f.add_argument('path')
    f.add_argument('--error')
    f.add_argument('--status', type=int)
    f.add_argument('--message')
    f.add_argument('--times', type=int)
    f = fsub.add_parser('hang', help='requests METHOD ...PATH get no answer for SECS, then are handled (late)')
    f.add_argument('method')
    f.add_argument('path')
    f.add_argument('--secs', type=float, default=30)
    f.add_argument('--times', type=int)
    f = fsub.add_parser('clear', help='remove every fault (and, with --acl, every grant)')
    f.add_argument('--acl', action='store_true')
    sp = add('grant')
    sp.add_argument('userid')
    sp.add_argument('path')
    sp.add_argument('privs', nargs='+')
    sp = add('pct')
    sp.add_argument('sub', choices=('config', 'set', 'status', 'reboot', 'start', 'stop', 'shutdown'))
    sp.add_argument('vmid', type=int)
    args, extra = parser.parse_known_args(argv)
    if args.cmd != 'pct' and extra:
        parser.error('unrecognized arguments: ' + ' '.join(extra))
    args.state_dir = os.path.abspath(args.state_dir)
    if getattr(args, 'seed', 0) is None:
        args.seed = [101]
    if args.cmd == 'serve':
        asyncio.run(serve(args))
        return 0
    return {'start': cmd_start, 'stop': cmd_stop, 'status': cmd_status, 'fault': cmd_fault,
            'grant': cmd_grant, 'images': cmd_images}.get(args.cmd, lambda a: cmd_pct(a, extra))(args)


if __name__ == '__main__':
    sys.exit(main())
