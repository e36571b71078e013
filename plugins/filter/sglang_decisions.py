# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the sglang_server role decides, as plain functions: whether the running server is the one its verified start
and the inventory describe (drift: the restart's reasons, verify's problems, audit's drift), a multi-node replica's
view of its other nodes (their reasons, who is behind a barrier, who would launch another server, whether it rolls
back), the reading of the state call and of a failed step, where the server listens, and which GPUs the gate reads.

The role's task files pass what they read and keep the order of the steps; each reason here has a unit test
(tests/unit/plugins/filter/test_sglang_decisions.py), and the file is in the mutation run's safety core: a reason
lost here restarts a server for nothing, or keeps one that runs the wrong code.
"""

import json
import math
import re
from urllib.parse import urlsplit

SGLANG_DEFAULT_HOST = '127.0.0.1'
SGLANG_DEFAULT_PORT = 30000
# A server bound to every address is probed on loopback
ANY_ADDRESS = ('0.0.0.0', '::', '')
FAILURE_CHARS = 2000  # a failed step's message kept for the final error


def _files(manifest):
    return manifest.get('files') or {}


def _sglang(manifest):
    return manifest.get('sglang') or {}


def reasons(manifest, state, rendered=None, forced=False, requested=False):
    """Why the server must restart, or what differs from its verified start: one {key, reason, pending} per
    difference, [] when the running server is the verified one and its files are the inventory's. key names the
    reason in one word (the decision's summary); pending is true for a change this run makes (a forced or requested
    restart, a file the inventory renders otherwise), false for what is already on disk or running.

    manifest: the last verified start's manifest ({} when none); state: the role's state reading (active,
    active_state, main_pid, args_sha1, unit_sha1, env_sha1, commit, dirty); rendered: {args, unit}, true where the
    inventory renders a file other than the one on disk; forced, requested: a restart asked for by the settings or a
    handler (nccl_tuning's, when the NCCL files change)."""
    manifest, rendered = manifest or {}, rendered or {}
    found = []

    def add(key, reason, pending=False):
        found.append({'key': key, 'reason': reason, 'pending': pending})

    if forced:
        add('forced', 'forced (sglang_server_force_restart)', True)
    if requested:
        add('env', 'requested by a handler (gpuserve sglang restart: the NCCL files change)', True)
    if not state['active']:
        add('stopped', 'unit is %s' % state['active_state'])
    for key in ('args', 'unit'):
        if rendered.get(key):
            add(key, '%s file differs from the inventory' % key, True)
    if not manifest:
        add('unverified', 'no deployment manifest (never verified)')
        return found
    verified_pid = int(manifest.get('main_pid') or 0)
    # A server systemd started at the container's boot, through the unit's gate, runs the files checked below: it is
    # the verified config (verify proves it live). One started by hand since is not.
    if state['active'] and verified_pid != state['main_pid'] and not state.get('started_at_boot'):
        add('unverified', 'running server (PID %s) is not the verified one (PID %s)'
            % (state['main_pid'], manifest.get('main_pid') or 'none'))
    for key, name, sha in (('args', 'args', 'args_sha1'), ('unit', 'unit', 'unit_sha1'),
                           ('env', 'NCCL env', 'env_sha1')):
        if _files(manifest).get(sha, '') != state[sha]:
            add(key, '%s file changed since the verified start' % name)
    commit = _sglang(manifest).get('commit', '')
    if commit != state['commit']:
        add('commit', 'SGLang commit changed since the verified start (%s -> %s)'
            % ((commit or '?')[:12], state['commit'][:12]))
    dirty = _sglang(manifest).get('dirty')
    if dirty != state['dirty']:
        add('dirty', 'SGLang tree dirty flag changed since the verified start (%s -> %s)' % (dirty, state['dirty']))
    return found


def drift(manifest, state, rendered=None, forced=False, requested=False):
    """The sentences of reasons(): verify's problems, audit's drift."""
    return [found['reason'] for found in reasons(manifest, state, rendered, forced, requested)]


# What check mode leaves out, by the key of a change it does not apply
NOT_APPLIED = {
    'env': "the inventory's NCCL values in the running processes (the env proof checks the env file on disk "
           'instead): nccl_tuning writes them on the real run',
    'commit': "the checkout, the reinstall and SGLang's import check at the pinned commit: sglang_install does them "
              'on the real run',
}
LIFECYCLE = ('the restart (stop, GPU release and gate, start, readiness, a generation, the env proof of the new '
             'processes, the manifest): it runs on the real run')


def decision(found, check_mode=False, pending_commit='', commit=''):
    """What the role does with the server, from reasons() (this node's, with its peers' for a multi-node replica;
    plain strings, as restart_server.yml passes them, are pending reasons of their own name), and in check mode what
    the preview leaves out.

    pending_commit: the commit sglang_install would check out in check mode ('' when none), commit the tree's now:
    a rebuild. Returns {action: rebuild, restart or none, restart, check_mode, keys, reasons, not_applied (the keys
    of pending changes check mode did not apply), skipped (what the preview did not check, and why), message}."""
    found = [item if isinstance(item, dict) else {'key': str(item), 'reason': str(item), 'pending': True}
             for item in found or []]
    if pending_commit and check_mode:
        found.append({'key': 'commit', 'pending': True, 'reason': (
            'sglang_install would check out SGLang %s and reinstall it (the tree is at %s)'
            % (pending_commit[:12], (commit or '?')[:12]))})
    keys = []
    for item in found:
        if item['key'] not in keys:
            keys.append(item['key'])
    sentences = [item['reason'] for item in found]
    rebuild = bool(pending_commit) and check_mode
    action = 'rebuild' if rebuild else 'restart' if found else 'none'
    not_applied = sorted(set(item['key'] for item in found if item['pending'])) if check_mode else []
    skipped = []
    if check_mode and found:
        skipped = [LIFECYCLE] + [NOT_APPLIED[key] for key in ('env', 'commit') if key in not_applied]
    if not found:
        message = ('nothing to do: the running server matches its verified manifest and the inventory' if check_mode
                   else 'no restart: the running server matches its verified manifest')
    else:
        said = ', '.join(keys)
        if sentences != keys:
            said += ' (%s)' % '; '.join(sentences)
        message = '%s: %s' % (('would ' if check_mode else '') + ('rebuild' if rebuild else 'restart'), said)
    return {'action': action, 'restart': bool(found), 'check_mode': bool(check_mode), 'keys': keys,
            'reasons': sentences, 'not_applied': not_applied, 'skipped': skipped, 'message': message}


def answer(result):
    """The JSON object a helper command printed, from its registered result; {} when it printed none (skipped,
    failed to run, or not JSON)."""
    try:
        value = json.loads((result or {}).get('stdout'))
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def verification(state, facts):
    """sglang_server_verification: the running server checked against its manifest, the files on disk, the tree and
    the pin, with rank 0's readiness and this node's env proof. facts: host, helper, replica (with rank and rank0),
    ready (rank 0's registered wait-ready), env_proof (env-proof's answer, {} when not run), expected_commit,
    rendered (audit's {args, unit}) and decision (this run's decision(), {} when none: in check mode the checks that
    a change it did not apply would fail are left out, and said so in skipped)."""
    manifest, replica = state.get('manifest') or {}, facts['replica']
    decided = facts.get('decision') or {}
    not_applied = decided.get('not_applied') or []
    ready = answer(facts.get('ready'))
    proof = (facts.get('env_proof') or {}) if state['active'] else {}
    problems = [] if state['helper_ok'] else ['%s missing (never deployed by this role?)' % facts['helper']]
    problems += drift(manifest, state, facts.get('rendered'))
    if not ready.get('ready'):
        problems.append('%s/health_generate not 200: %s' % (
            '' if replica['rank'] == 0 else 'rank 0 (%s): ' % replica['rank0'], ready.get('phase') or 'not probed'))
    if not proof.get('ok'):
        problems.append('env proof: %s' % (proof.get('error') or 'not run'))
    expected = facts.get('expected_commit')
    if expected and expected != state['commit'] and 'commit' not in not_applied:
        problems.append('tree commit %s is not the pinned %s' % (state['commit'], expected))
    if state['dirty']:
        problems.append('SGLang tree is dirty: %s' % ', '.join(state['changes']))
    return {
        'host': facts['host'], 'ok': not problems, 'problems': problems,
        'decision': decided.get('message'), 'skipped': decided.get('skipped') or [],
        'sglang': {'commit': state['commit'], 'dirty': state['dirty'], 'version': _sglang(manifest).get('version')},
        'unit': {'active': state['active'], 'main_pid': state['main_pid'], 'since': state['since'],
                 'started_at_boot': bool(state.get('started_at_boot'))},
        'readiness': ready,
        'replica': {'name': replica['name'], 'nnodes': replica['nnodes'], 'node_rank': replica['rank']},
        'env_proof': {'ok': bool(proof.get('ok')), 'variables': proof.get('expected') or {},
                      'processes': len(proof.get('processes') or []), 'schedulers': proof.get('schedulers') or 0,
                      'error': proof.get('error')},
        'manifest': {'phase': manifest.get('phase'), 'times': manifest.get('times') or {},
                     'gate': manifest.get('gate') or {},
                     'kill_to_pass_s': (manifest.get('release') or {}).get('kill_to_pass_s'),
                     'driver': manifest.get('driver')},
    }


def started_at_boot(unit, boot):
    """Whether the unit became active before the container's boot finished (systemd's FinishTimestampMonotonic, 0
    while it still boots): the boot started it. False when either stamp was not read."""
    try:
        active_since = int(unit['ActiveEnterTimestampMonotonic'])
        finished = int(boot['FinishTimestampMonotonic'])
    except (KeyError, TypeError, ValueError):
        return False
    return active_since > 0 and (finished == 0 or active_since <= finished)


def state(result, paths, installed=None):
    """__sglang_server_state from the registered `gpuserve-sglang state` call: rc 2 (the helper is not installed yet,
    check mode on a fresh container) reads as nothing deployed. paths: {args, unit, env}, the files it read;
    installed: sglang_install's commit and dirty flag, the tree's when git could not read it."""
    ok = result.get('rc') == 0
    read = answer(result) if ok else {}
    git, files, unit = read.get('git') or {}, read.get('files') or {}, read.get('unit') or {}
    installed = installed or {}
    git_ok = git.get('rc') == 0

    def file(key):
        return files.get(paths[key]) or {}

    active_state = unit.get('ActiveState') or 'unknown'
    return {
        'started_at_boot': started_at_boot(unit, read.get('boot')),
        'helper_ok': ok,
        'commit': git['commit'] if git_ok else installed.get('commit') or 'unknown',
        'dirty': git['dirty'] if git_ok else installed.get('dirty'),
        'changes': (git.get('changes') or [])[:20],
        'git_error': git.get('error') or '',
        'active': active_state == 'active',
        'active_state': active_state,
        'enabled': unit.get('UnitFileState') == 'enabled',
        'main_pid': int(unit.get('MainPID') or 0),
        'since': unit.get('ActiveEnterTimestamp') or '',
        'args_sha1': file('args').get('sha1', ''),
        'unit_sha1': file('unit').get('sha1', ''),
        'env_sha1': file('env').get('sha1', ''),
        'env_file_exists': bool(file('env').get('exists')),
        'python_exists': bool(read.get('python_exists')),
        'manifest': read.get('manifest') or {},
        # with --startup (the lifecycle's read for the manifest): where the last start went, phase by phase
        'startup': read.get('startup') or {},
        # with --driver (the same read): the NVIDIA driver version every GPU reports
        'driver': (read.get('driver') or {}).get('driver_version'),
    }


def failure(result, task, stopped=None):
    """{task, msg} of a failed lifecycle step, for the rollback's final error: the step's message, and what a
    helper command said went wrong (its JSON 'error', else its 'phase'); with stopped given, also whether the
    server had been stopped when it failed (the rollback's condition: a later lifecycle run resets the fact)."""
    result = result or {}
    said = answer(result)
    detail = said.get('error') or said.get('phase') or ''
    msg = result['msg'] if 'msg' in result else result.get('stderr', '')
    msg = str(msg)
    if detail:
        msg = '%s: %s' % (msg[:-1] if msg.endswith('.') else msg, detail)
    if len(msg) > FAILURE_CHARS:
        msg = msg[:FAILURE_CHARS] + '...'
    out = {'task': task or '?', 'msg': msg}
    if stopped is not None:
        out['stopped'] = bool(stopped)
    return out


def listen(argv):
    """Where a server launched with argv listens ({host, port}) and the address to probe it at (probe_host)."""
    argv = list(argv or [])

    def value(flag, default):
        return argv[argv.index(flag) + 1] if flag in argv[:-1] else default

    host = str(value('--host', SGLANG_DEFAULT_HOST))
    return {'host': host, 'port': int(value('--port', SGLANG_DEFAULT_PORT)),
            'probe_host': SGLANG_DEFAULT_HOST if host in ANY_ADDRESS else host}


def _peers(replica, host):
    return [node['host'] for node in replica['nodes'] if node['host'] != host]


def peer_reasons(replica, hostvars, host, own):
    """A multi-node server restarts as a whole: this node's reasons (own, as reasons() gives them), then every other
    node's, each sentence named by its node."""
    found = list(own)
    for peer in _peers(replica, host):
        found += [dict(item, reason='%s: %s' % (peer, item['reason']))
                  for item in hostvars[peer].get('__sglang_server_node_reasons') or []]
    return found


def behind(replica, hostvars, host, step):
    """The other nodes of the replica that have not passed step (the barrier: they failed before it)."""
    return [peer for peer in _peers(replica, host)
            if hostvars[peer].get('__sglang_server_passed') != step]


def rolls_back(replica, hostvars):
    """Whether the replica rolls back: a node that stopped (its failure's `stopped`, filter sglang_failure) leaves its
    peers waiting for a rank 0 that is gone."""
    return any(bool((hostvars[node['host']].get('__sglang_server_failure') or {}).get('stopped'))
               for node in replica['nodes'])


# Settings that differ between the nodes of one server by design
OWN_ARGS = ('node_rank', 'host')


def differ(replica, hostvars, host, mine):
    """The other nodes that would launch a server other than this node's (mine: its effective launch settings),
    compared but for OWN_ARGS; a node whose settings are not read yet is judged by its own preflight."""
    def launch(args):
        return dict((k, v) for k, v in args.items() if k not in OWN_ARGS)
    return [peer for peer in _peers(replica, host)
            if hostvars[peer].get('__sglang_server_effective_args') is not None
            and launch(hostvars[peer]['__sglang_server_effective_args']) != launch(mine)]


NOTHING_WRITTEN = ' Nothing was written or stopped: the server runs as before.'


def validation(result, context):
    """{ok, msg} of `gpuserve-sglang validate-args` (its registered result): whether the server can listen on its host
    in this container, whether the draft fits the speculative algorithm, then whether SGLang accepts the arguments,
    and the message either way. context: vmid, record
    (sglang_server_args_check_record), rollback (a rollback's check: nothing is left to keep running)."""
    said = answer(result)
    keep = '' if context.get('rollback') else NOTHING_WRITTEN
    bind = said.get('listen') or {'ok': True}
    if not bind['ok']:
        # SGLang 0.5.23 hangs in its torch.distributed init on a host it cannot bind, rather than fail
        return {'ok': False, 'msg': (
            "sglang_server_args.host is '%s', and the server cannot listen there: %s (a TCP socket on port 0, in "
            'container %s). SGLang accepts the address and then hangs at start rather than fail. Set host in '
            "sglang_server_args to an address of this container (`ip -brief address` there), 0.0.0.0 for every IPv4 "
            "address, or leave it out (SGLang's default 127.0.0.1; behind a gateway, the address the gateway "
            'reaches).%s' % (bind.get('host'), bind.get('error'), context['vmid'], keep))}
    draft = said.get('draft') or {'ok': True}
    if not draft['ok']:
        # SGLang 0.5.23 serves EAGLE with an EAGLE-3 draft at accept length 1.00, with no error
        return {'ok': False, 'msg': '%s (sglang_server_args).%s' % (draft.get('error'), keep)}
    version = said.get('sglang_version') or '?'
    if not said.get('ok'):
        error = said.get('error') or ''
        model = ' (the model check: sglang_server_check_model)' if re.match(
            r'(model_path|speculative_draft_model_path) ', error) else ''
        return {'ok': False, 'msg': (
            "SGLang %s rejected the launch arguments (sglang_server_args over sglang_server_base_args; a field's name "
            'there is SGLang\'s, as in this message): %s%s.%s' % (version, error, model, keep))}
    msg = 'SGLang %s accepts the arguments' % version
    if said.get('cached_since'):
        msg += (': arguments unchanged since %s, when every check passed (the record %s), so SGLang was not '
                'imported' % (said['cached_since'], context.get('record')))
    msg += ' (checked: %s)' % ', '.join(said.get('checks') or [])
    if 'listen' in said:
        msg += '; it can listen on %s here' % bind.get('host')
    if said.get('warnings'):
        msg += ' (warnings: %s)' % '; '.join(said['warnings'])
    if 'record' in said:
        msg += '; %s' % said['record']
    return {'ok': True, 'msg': msg}


# SGLang's multi-node flags: the role derives them from the inventory, the same way on every node
MULTINODE_ARGS = ('nnodes', 'node_rank', 'dist_init_addr', 'nccl_init_addr')
SPECULATIVE_TRIO = ('speculative_num_steps', 'speculative_eagle_topk', 'speculative_num_draft_tokens')
# What ExecStart may carry unquoted: systemd would split or expand anything else
PLAIN_WORD = re.compile(r'^[A-Za-z0-9_./:=@+,-]+$')
LOOPBACK = ('127.0.0.1', 'localhost', '::1')
NOTHING_STOPPED = ' Nothing was stopped.'


def _int(value):
    """A whole number as Jinja's int filter reads it: 0 for what is not one."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _set(value):
    return isinstance(value, str) and len(value) > 0


def launch_problems(args, inventory):
    """What is wrong with the effective launch settings (args) and the inventory around them, before anything is
    read from or changed in the container: one sentence per rule broken, each saying what to change.

    inventory: host, args (sglang_server_args as set), port (gpuserve_port), gpu_count, replica, entrypoint,
    pve_host, vmid, hosts (groups['all']), gateway_worker_url, gateway_host, gateway_keep_healthy, and hostvars
    (the other nodes' effective settings, for a multi-node replica)."""
    problems = []
    own = [flag for flag in MULTINODE_ARGS if flag in (inventory.get('args') or {})]
    if own:
        problems.append(
            'sglang_server_args sets %s: leave them out. The role derives --nnodes, --node-rank and --dist-init-addr '
            "from the inventory (sglang_server_replica, sglang_server_nnodes, sglang_server_node_rank, rank 0's "
            'sglang_server_node_address and sglang_server_dist_init_port), the same way on every node.'
            % ', '.join(own))
    if str(args.get('port')) != str(inventory['port']):
        problems.append('The launch settings say port %s but gpuserve_port is %s: set the port once, as gpuserve_port '
                        'in the inventory, and leave port out of sglang_server_args.'
                        % (args.get('port', '(none)'), inventory['port']))
    trio = [key for key in SPECULATIVE_TRIO if args.get(key) is not None]
    if len(trio) not in (0, 3):
        problems.append('speculative_num_steps, speculative_eagle_topk and speculative_num_draft_tokens go together: '
                        'set all three or none (null) in sglang_server_args; only %s set.' % ', '.join(trio))
    if args.get('speculative_eagle_topk') == 1 and (
            _int(args.get('speculative_num_draft_tokens')) != _int(args.get('speculative_num_steps')) + 1):
        problems.append('speculative_eagle_topk is 1 (a chain), so speculative_num_draft_tokens must be '
                        'speculative_num_steps + 1 = %d; it is %s.'
                        % (_int(args.get('speculative_num_steps')) + 1, args.get('speculative_num_draft_tokens')))
    algorithm = args.get('speculative_algorithm')
    if str(algorithm).upper() in ('EAGLE', 'EAGLE3') and not _set(args.get('speculative_draft_model_path')):
        problems.append("speculative_algorithm is %s: set speculative_draft_model_path in sglang_server_args (the "
                        "EAGLE-3 draft head's directory)." % algorithm)
    if not _set(args.get('model_path')):
        problems.append('Set model_path in sglang_server_args (the directory holding the model weights).')
    replica = inventory['replica']
    tp, pp, gpus = _int(args.get('tp_size', 1)), _int(args.get('pp_size', 1)), _int(inventory['gpu_count'])
    if tp * pp != gpus * replica['nnodes']:
        problems.append('tp_size %d x pp_size %d does not use the %s GPUs this container expects '
                        '(sglang_server_gpu_count)%s: change one of them.' % (
                            tp, pp, inventory['gpu_count'],
                            ' on each of the %d nodes of its replica, %d in all' % (replica['nnodes'],
                                                                                    gpus * replica['nnodes'])
                            if replica['multinode'] else ''))
    words = [word for word in inventory['entrypoint'] if not PLAIN_WORD.match(str(word))]
    if words:
        problems.append('sglang_server_entrypoint items may hold only letters, digits and _./:=@+,- (systemd would '
                        'split or expand anything else): %s.' % words)
    if inventory.get('pve_host') not in inventory['hosts'] or inventory.get('vmid') is None:
        problems.append('Set gpuserve_pve_host (the inventory name of the PVE host) and proxmox_vmid for %s: GPU '
                        'release and the memory gate run on the host, scoped to this container.' % inventory['host'])
    problems += _gateway_problems(args, inventory)
    if replica['multinode']:
        others = differ(replica, inventory['hostvars'], inventory['host'], args)
        if others:
            problems.append('%s and %s of replica %s would launch different servers: every node needs the same '
                            'settings (sglang_server_args, gpuserve_gpu_count, ...) except host; here: %s.' % (
                                inventory['host'], ', '.join(others), replica['name'],
                                json.dumps(args, sort_keys=True)))
    return problems


def _gateway_problems(args, inventory):
    url = inventory.get('gateway_worker_url') or ''
    if not url:
        return []
    replica = inventory['replica']
    if replica['rank'] > 0:
        return ['%s is node rank %d of replica %s: it serves no API (SGLang runs the HTTP server on rank 0 only; the '
                'other nodes answer a dummy /health), so the gateway cannot route to it. Set '
                'sglang_server_gateway_worker_url on rank 0 (%s) only.'
                % (inventory['host'], replica['rank'], replica['name'], replica['rank0'])]
    try:
        parts = urlsplit(url)
        url_host, url_port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number, or out of range
        url_host = url_port = None
    bind = str(args.get('host') or SGLANG_DEFAULT_HOST)
    gateway = inventory.get('gateway_host') or ''
    if (re.match(r'^https?://[^/]+', url) and gateway in inventory['hosts']
            and str(url_port) == str(inventory['port'])
            and (bind not in LOOPBACK or url_host in LOOPBACK)
            and str(inventory.get('gateway_keep_healthy')).isdigit()):
        return []
    return ["sglang_server_gateway_worker_url is %s: it must be http(s)://ADDRESS:%s (gpuserve_port), the address at "
            "which the gateway reaches this server; the gateway's inventory host (sglang_server_gateway_host, "
            "default: the first of group sglang_gateway) must be known (it is '%s'); the server must listen there, "
            'not only on loopback (set host in sglang_server_args to that address or 0.0.0.0; it is %s); '
            'sglang_server_gateway_keep_healthy is 0 or more.' % (url, inventory['port'], gateway, bind)]


# SGLang 0.5.23's shutdown after SIGTERM (managers/tokenizer_manager.py, sigterm_watchdog): the watchdog looks at the
# flag every 5 s, drains, gives the schedulers 15 s after ShutdownReq, then waits up to 60 s for the killed children
# to be reaped (kill_process_tree's wait_timeout).
SGLANG_SHUTDOWN_S = {'watchdog_poll': 5, 'schedulers': 15, 'reap': 60}


def unit_stop_timeout(drain_timeout):
    """The unit's TimeoutStopSec: SGLang's own shutdown after SIGTERM (a `systemctl stop` by hand, or the lifecycle's
    stop when the load is unknown) with a drain of drain_timeout seconds, before systemd sends SIGKILL."""
    return int(math.ceil(float(drain_timeout))) + sum(SGLANG_SHUTDOWN_S.values())


def bound_problems(settings):
    """The settings that bound each other: the port wait inside the readiness wait, a lock that outlasts one
    lifecycle, a multi-node rank 0's two ports apart. settings: the role's sglang_server_* values by their names
    without the prefix (listen_timeout, ready_timeout, lock_ttl, stop_drain_timeout, release_grace, gate_timeout,
    unit_gate_timeout, nnodes, dist_init_port) and port (gpuserve_port)."""
    problems = []
    if float(settings['listen_timeout']) > float(settings['ready_timeout']):
        problems.append(
            'sglang_server_listen_timeout (%s s) is longer than sglang_server_ready_timeout (%s s), inside which the '
            'port is waited for, so it would never end the wait: lower it, or raise the ready timeout.'
            % (settings['listen_timeout'], settings['ready_timeout']))
    bound = unit_stop_timeout(settings['stop_drain_timeout']) + math.ceil(
        sum(float(settings[key]) for key in LIFECYCLE_TIMEOUTS))
    if float(settings['lock_ttl']) < bound:
        problems.append(
            "sglang_server_lock_ttl (%s s) is shorter than one restart can take (%d s: the unit's stop timeout, "
            'sglang_server_stop_drain_timeout + %d s, + %s), so the lock could end while this run still restarts the '
            'server and let another run in. Raise it, or leave it unset (its default is twice that plus 1200 s).'
            % (settings['lock_ttl'], bound, sum(SGLANG_SHUTDOWN_S.values()),
               ' + '.join('sglang_server_' + key for key in LIFECYCLE_TIMEOUTS)))
    # the ranges are checked before (setting_problems): these are whole numbers
    if int(settings['nnodes']) > 1 and int(settings['dist_init_port']) == int(settings['port']):
        problems.append(
            "sglang_server_dist_init_port and gpuserve_port are both %s: rank 0 serves SGLang's API on gpuserve_port "
            "and torch.distributed's rendezvous (--dist-init-addr) on sglang_server_dist_init_port, so they must "
            'differ.' % settings['port'])
    return problems


# What one lifecycle can wait for after the stop (unit_stop_timeout), in order: the lock must outlast their sum
LIFECYCLE_TIMEOUTS = ('release_grace', 'gate_timeout', 'unit_gate_timeout', 'ready_timeout')


def gate_selector(settings):
    """The options that choose the GPUs of gpu_memory_gate and gpu_release's gate, from the role's settings
    (minors, gpu_info_root, gpus, expected_count): indexes only without minors, and no count check for 0. The same
    dict serves the health read before the stop, the gate after the release and the audit's health read."""
    minors = list(settings.get('minors') or [])
    count = int(settings.get('expected_count') or 0)
    return {'minors': minors, 'gpu_info_root': settings['gpu_info_root'],
            'gpus': [] if minors else list(settings.get('gpus') or []),
            'expected_count': count if count > 0 else None}


def gate_count(selector):
    """How many GPUs the unit's own gate (ExecStartPre, in the container) must see: the container sees exactly the
    GPUs the host's gate selects. None (no check) when the selection is every GPU with no count."""
    return len(selector['minors']) or len(selector['gpus']) or selector['expected_count']


def stop_refusals(facts):
    """Why the lifecycle must not stop the server, one message each, [] when none: too little room left for the
    record in the manifest directory (room: the registered df --output=avail --block-size=1M read, skipped when
    min_free_mib is 0), GPUs that cannot serve (health: sglang_server_gpu_health; none when not read)."""
    found = []
    room = facts.get('room') or {}
    if room and not room.get('skipped'):
        lines = room.get('stdout_lines') or ['']
        free = str(lines[-1]).strip()
        need = int(facts.get('min_free_mib') or 0)
        if not re.match(r'^[0-9]+$', free) or int(free) < need:
            amount = free if re.match(r'^[0-9]+$', free) else 'an unknown amount of (df said: %s)' % room.get('stdout', '')
            found.append('not restarting: %s has %s MiB free, and the manifest, its history and the last verified '
                         'config, written after the new server is verified, need at least %d MiB '
                         '(sglang_server_min_free_mib). Nothing was stopped: the server runs as before. Free space '
                         'there, then run again.' % (facts.get('dir'), amount, need))
    health = facts.get('health')
    if isinstance(health, dict) and not health.get('passed'):
        found.append('not restarting: %s. Nothing was stopped: the server runs as before. Fix the GPU (or set the '
                     'check in sglang_server_gate_health to warn or ignore), then run again.'
                     % (health.get('msg') or 'the health read failed'))
    return found


def env_proof_said(proof, unit, variables):
    """{ok, msg} of the env proof's answer (gpuserve-sglang env-proof) for the lifecycle's assert: how many processes
    and schedulers carry all the variables, or why not, with the first process's mismatches."""
    proof = proof if isinstance(proof, dict) else {}
    if proof.get('ok'):
        return {'ok': True, 'msg': '%d processes (%s schedulers) carry all %d variables'
                % (len(proof.get('processes') or ()), proof.get('schedulers'), int(variables))}
    mismatched = [p.get('mismatched') for p in proof.get('processes') or () if not p.get('ok')]
    parts = ['Environment proof failed for %s: %s.' % (unit, proof.get('error')), proof.get('hint') or '',
             'Mismatches: %s' % ((mismatched[0] if mismatched else None) or {})]
    return {'ok': False, 'msg': ' '.join(part for part in parts if part)}


class FilterModule:
    def filters(self):
        return {
            'sglang_drift': drift,
            'sglang_reasons': reasons,
            'sglang_decision': decision,
            'sglang_verification': verification,
            'sglang_state': state,
            'sglang_failure': failure,
            'sglang_listen': listen,
            'sglang_peer_reasons': peer_reasons,
            'sglang_replica_behind': behind,
            'sglang_replica_rolls_back': rolls_back,
            'sglang_validation': validation,
            'sglang_launch_problems': launch_problems,
            'sglang_bound_problems': bound_problems,
            'sglang_gate_selector': gate_selector,
            'sglang_gate_count': gate_count,
            'sglang_unit_stop_timeout': unit_stop_timeout,
            'sglang_stop_refusals': stop_refusals,
            'sglang_env_proof_said': env_proof_said,
        }
