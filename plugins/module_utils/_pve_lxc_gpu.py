# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The work of gpuserve.sglang.proxmox_lxc_gpu. Private to this collection.

Read the container's devN entries, compute the entries that pass the wanted GPU device nodes, change only the
difference (never in check mode), restart only when the device set changed and a restart was asked for. A running
container whose config already holds the wanted entries, but which has not taken them (PVE keeps a changed devN
pending until the container restarts: a run that gave up, or was killed, before its restart), is restarted too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.module_utils.basic import env_fallback, missing_required_lib

from ansible_collections.gpuserve.sglang.plugins.module_utils import _pve_client as client
from ansible_collections.gpuserve.sglang.plugins.module_utils import _pve_devices as devices


def argument_spec():
    return dict(
        vmid=dict(type='int', required=True),
        node=dict(type='str'),
        devices=dict(type='list', elements='path'),
        device_root=dict(type='path', default='/dev'),
        patterns=dict(type='list', elements='str', default=list(devices.DEFAULT_PATTERNS)),
        expect_gpus=dict(type='int'),
        gid=dict(type='int'),
        uid=dict(type='int'),
        mode=dict(type='str'),
        prune=dict(type='bool', default=False),
        method=dict(type='str', default='auto', choices=['auto', 'api', 'pct']),
        pct_path=dict(type='path', default='/usr/sbin/pct'),
        restart=dict(type='bool', default=False),
        lock_retries=dict(type='int', default=5),
        lock_retry_delay=dict(type='float', default=2.0),
        task_timeout=dict(type='int', default=120),
        api_host=dict(type='str', fallback=(env_fallback, ['PROXMOX_HOST'])),
        api_port=dict(type='int', fallback=(env_fallback, ['PROXMOX_PORT'])),
        api_user=dict(type='str', fallback=(env_fallback, ['PROXMOX_USER'])),
        api_password=dict(type='str', no_log=True, fallback=(env_fallback, ['PROXMOX_PASSWORD'])),
        api_token_id=dict(type='str', no_log=False, fallback=(env_fallback, ['PROXMOX_TOKEN_ID'])),
        api_token_secret=dict(type='str', no_log=True, fallback=(env_fallback, ['PROXMOX_TOKEN_SECRET'])),
        ca_path=dict(type='path', fallback=(env_fallback, ['PROXMOX_CA_PATH'])),
        validate_certs=dict(type='bool', default=True, fallback=(env_fallback, ['PROXMOX_VALIDATE_CERTS'])),
        api_timeout=dict(type='int', default=30, fallback=(env_fallback, ['PROXMOX_API_TIMEOUT'])),
    )


def choose_method(params):
    """api for root@pam with a password, else pct: PVE refuses devN from API tokens and other users."""
    if params['method'] != 'auto':
        return params['method']
    if params.get('api_password') and params.get('api_user') == 'root@pam' and params.get('api_host'):
        return 'api'
    return 'pct'


def wanted_paths(module, params):
    """The devN paths (under /dev) to pass, from the given list or discovered under device_root."""
    root = params['device_root']
    if params.get('devices'):
        host_paths = list(params['devices'])
    else:
        if not os.path.isdir(root):
            module.fail_json(msg='device_root {0} does not exist on {1}: run this module on the PVE host, or give '
                                 'devices'.format(root, os.uname()[1]))
        host_paths = devices.discover(root, params['patterns'])
    try:
        paths = [devices.container_path(p, root) for p in host_paths]
    except devices.DeviceError as exc:
        module.fail_json(msg=str(exc))
    seen, ordered = set(), []
    for path in sorted(paths, key=devices.natural_key):
        if path not in seen:
            seen.add(path)
            ordered.append(path)
    gpus = [p for p in ordered if devices.GPU.match(p)]
    if params.get('expect_gpus') is not None and len(gpus) != params['expect_gpus']:
        module.fail_json(msg='expected {0} GPU device nodes (nvidiaN) under {1}, found {2}: {3}'.format(
            params['expect_gpus'], root, len(gpus), ', '.join(gpus) or 'none'), devices=ordered)
    if not ordered:
        module.fail_json(msg='no GPU device nodes found under {0} (patterns {1}); is the NVIDIA driver loaded on the '
                             'host?'.format(root, ', '.join(params['patterns'])))
    return ordered


def make_client(module, params, method):
    if method == 'api':
        if not client.HAS_PROXMOXER:
            module.fail_json(msg=missing_required_lib('proxmoxer'), exception=client.PROXMOXER_IMPORT_ERROR)
        missing = [k for k in ('api_host', 'api_user', 'node') if not params.get(k)]
        if missing:
            module.fail_json(msg='method api needs {0}'.format(', '.join(missing)))
        if not (params.get('api_password') or params.get('api_token_secret')):
            module.fail_json(msg='method api needs api_password (root@pam) or an API token')
        return client.ApiClient(params, params['vmid'], params['node'], params['task_timeout'])
    if not os.access(params['pct_path'], os.X_OK):
        module.fail_json(msg='devN passthrough needs root@pam with a password on the API (PVE refuses API tokens) or '
                             '`pct` on the node, and {0} is not here on {1}: run this task on the PVE host '
                             '(delegate_to) or give api_password for root@pam'.format(
                                 params['pct_path'], os.uname()[1]))
    return client.PctClient(module, params['vmid'], params['pct_path'])


def explain(exc, method, params):
    text = exc.message
    if client.DENIED_DEV in text or (exc.status == 403 and method == 'api'):
        text += (' - PVE lets only root@pam with a password set devN (API tokens and other users are refused): give '
                 'api_user root@pam and api_password, or run with method pct on the node')
    return 'CT {0}: {1}'.format(params['vmid'], text)


def not_taken(pve, wanted, opts, params):
    """The devN keys a running container has not taken: its running values (the config without pending changes)
    differ from the wanted entries. [] for a stopped container, which takes every pending change when it starts."""
    if pve.status() != 'running':
        return []
    change = devices.plan(pve.config(current=True), wanted, opts, prune=params['prune'])
    return sorted(set(change['set']) | set(change['delete']))


def run(module):
    params = module.params
    method = choose_method(params)
    try:
        opts = devices.normalise_options(gid=params.get('gid'), uid=params.get('uid'), mode=params.get('mode'))
    except devices.DeviceError as exc:
        module.fail_json(msg=str(exc))
    wanted = wanted_paths(module, params)
    result = dict(changed=False, method=method, vmid=params['vmid'], devices=wanted, restart_required=False,
                  restarted=False)
    pve = make_client(module, params, method)
    retries, delay = params['lock_retries'], params['lock_retry_delay']
    try:
        config, _attempts = client.with_lock_retries(pve.config, 0, delay)
        try:
            change = devices.plan(config, wanted, opts, prune=params['prune'])
        except devices.DeviceError as exc:
            module.fail_json(msg=str(exc), **result)
        result['diff'] = dict(before=devices.render(change['before']), after=devices.render(change['after']),
                              before_header='CT {0} devN'.format(params['vmid']),
                              after_header='CT {0} devN'.format(params['vmid']))
        result['entries'] = change['after']
        result['set'] = change['set']
        result['delete'] = change['delete']
        if not change['set'] and not change['delete']:
            pending = not_taken(pve, wanted, opts, params)
            if pending:
                # the config is right, the running container is not: it takes pending devN only at a restart
                result.update(pending=pending, restart_required=True, changed=params['restart'])
                if params['restart'] and not module.check_mode:
                    client.with_lock_retries(lambda: pve.reboot(params['task_timeout']), retries, delay)
                    result.update(restarted=True, restart_required=False)
            module.exit_json(**result)
        result['changed'] = True
        running = pve.status() == 'running'
        result['restart_required'] = running
        if module.check_mode:
            module.exit_json(**result)

        def apply():
            # A retry after a lock re-reads the config, so the digest and the plan are current.
            current = pve.config()
            again = devices.plan(current, wanted, opts, prune=params['prune'])
            if again['set'] or again['delete']:
                pve.update(again['set'], again['delete'], current.get('digest'))
        _applied, attempts = client.with_lock_retries(apply, retries, delay)
        result['attempts'] = attempts
        if running and params['restart']:
            client.with_lock_retries(lambda: pve.reboot(params['task_timeout']), retries, delay)
            result['restarted'] = True
            result['restart_required'] = False
    except client.PveFailure as exc:
        module.fail_json(msg=explain(exc, method, params), **result)
    module.exit_json(**result)
