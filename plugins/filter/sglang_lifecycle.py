# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the sglang_server lifecycle writes and says: the deployment manifest of a verified start,
and the message of a readiness wait that did not end ready. Both were Jinja inside tasks/lifecycle.yml; here they are
plain functions with tests, and the task passes what it read."""

import datetime
import json

from ansible.errors import AnsibleFilterError

MANIFEST_SCHEMA = 1
GENERATION_TEXT_CHARS = 200  # the generation's text kept in the manifest, as Jinja's truncate(200) cut it
TRUNCATE_LEEWAY = 5  # Jinja's truncate keeps a text up to this many characters over its length


def truncate(text, length, end='...'):
    """Jinja's `truncate(length)` (words kept whole, `end` appended, a few characters of leeway), which the manifest's
    generation text and the readiness message used."""
    text = str(text)
    if len(text) <= length + TRUNCATE_LEEWAY:
        return text
    return text[:length - len(end)].rsplit(' ', 1)[0] + end


def iso(epoch):
    """An epoch (seconds since 1970, UTC) as now(utc=true).isoformat() writes it: UTC, no zone."""
    return datetime.datetime.fromtimestamp(float(epoch), datetime.timezone.utc).replace(tzinfo=None).isoformat()


def need(facts, *keys):
    missing = [k for k in keys if k not in facts]
    if missing:
        raise AnsibleFilterError('sglang_manifest: missing %s' % ', '.join(missing))


def manifest(facts):
    """The deployment manifest of one node (sglang-manifest.json), from the facts the lifecycle gathered:
    service, host, phase, run, reasons, src, entrypoint, env, state (tasks/state.yml's reading: main_pid, since,
    commit, dirty, changes, args_sha1, unit_sha1, env_sha1, driver), validation (validate-args' answer: argv,
    sglang_version), env_proof (env-proof's answer), times (begin, begin_iso,
    stopping, stopped, started, ready: epochs; no `stopped` when gpu_release ran the stop, whose timings then have
    stop_s), done (epoch), stop (gpuserve-sglang stop's answer), release (gpu_release's result), ready (rank 0's
    wait-ready answer, with its /generate answer under generation), replica (name, nnodes, nodes), node_rank,
    through."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError('sglang_manifest: expected a dict of the lifecycle facts, got %s' % type(facts).__name__)
    need(facts, 'service', 'host', 'state', 'validation', 'env_proof', 'times', 'done', 'release', 'ready',
         'replica', 'node_rank', 'through')
    state, times, release = facts['state'], facts['times'], facts['release'] or {}
    proof, replica = facts['env_proof'], facts['replica']
    ready_said = dict(facts['ready'] or {})
    generation = ready_said.pop('generation', None) or {}
    begin, started = float(times['begin']), float(times['started'])
    ready, done = float(times['ready']), float(facts['done'])
    stopping = float(times['stopping'])
    # one node stops inside gpu_release's call (its stop_command): the stop's end is its own share of that call
    stopped = float(times['stopped']) if 'stopped' in times else stopping + float(
        (release.get('timings') or {}).get('stop_s') or 0)
    stop = facts.get('stop') or {}
    return {
        'schema': MANIFEST_SCHEMA,
        'service': facts['service'],
        'host': facts['host'],
        # the verified process: a later restart outside the lifecycle shows as a different PID
        'main_pid': state['main_pid'],
        'active_since': state['since'],
        'phase': facts.get('phase') or 'deploy',
        # the controller run that wrote it (the lock's owner): a rollout summary tells this run's restarts apart
        'run': facts.get('run') or {},
        'reasons': facts.get('reasons') or ['restart requested'],
        'sglang': {'commit': state['commit'], 'dirty': state['dirty'], 'changes': state['changes'],
                   'version': facts['validation'].get('sglang_version'), 'src': facts.get('src')},
        'argv': facts['validation'].get('argv'),
        'entrypoint': facts.get('entrypoint'),
        'env': facts.get('env'),
        'env_proof': {'ok': proof['ok'], 'processes': len(proof['processes']), 'schedulers': proof['schedulers'],
                      'control_group': proof['control_group']},
        'files': {'args_sha1': state['args_sha1'], 'unit_sha1': state['unit_sha1'], 'env_sha1': state['env_sha1']},
        'driver': state['driver'],
        'times': {
            'begin': times['begin_iso'],
            'done': iso(done),
            'started_epoch': started,
            'validate_and_stop_s': round(stopped - begin, 3),
            # the stop task as the controller saw it; stop.stop_s is the server's own, first signal to unit stopped
            'stop_s': round(stopped - stopping, 3),
            'release_and_gate_s': round(started - stopped, 3),
            'start_to_ready_s': round(ready - started, 3),
            # what the server's clients saw: from the stop's start to ready again
            'downtime_s': round(ready - stopping, 3),
            'total_s': round(done - begin, 3),
        },
        # where the start went, from the unit's journal (_startup_log): imports, weight load, CUDA graphs, warm-up
        'startup': state.get('startup') or {},
        # how the server was stopped: the load and its source, the signals, a drain and what it cut
        'stop': dict((k, stop[k]) for k in ('how', 'load', 'drain', 'signals', 'signal_epoch', 'stop_s', 'msg')
                     if k in stop),
        'release': {'killed': release.get('killed', []), 'timings': release.get('timings', {}),
                    'kill_to_pass_s': release.get('kill_to_pass_s'),
                    'gate_passed_epoch': release.get('gate_passed_epoch')},
        # the gate's figures without its raw nvidia-smi text
        'gate': dict((k, v) for k, v in (release.get('gate') or {}).items() if k != 'raw'),
        'ready': ready_said,
        'generation': {'text': truncate(generation.get('text', ''), GENERATION_TEXT_CHARS),
                       'meta': generation.get('meta_info') or {}},
        # one server over several nodes: which one this is and its nodes by rank; readiness and the generation are
        # rank 0's (one node: nnodes 1)
        'replica': {'name': replica['name'], 'nnodes': replica['nnodes'], 'node_rank': int(facts['node_rank']),
                    'nodes': [node['host'] for node in replica['nodes']], 'through': facts['through']},
    }


# wait-ready's exit statuses (gpuserve-sglang wait-ready): 3 not yet (the retries ran out), 4 the unit is not running,
# 5 nothing listens past the listen timeout; anything else (no rc: the connection failed) means it did not run
READY_CASES = {3: 'slow', 4: 'stopped', 5: 'no_listen', 6: 'no_generation'}


def ready_case(rc, ct_status):
    """Which failure a readiness wait that did not end ready is: slow, stopped, no_listen, no_generation (ready, but
    its first generation failed), ct_down (the container itself is not running, per `pct status` on its PVE host)
    or no_check."""
    if rc in READY_CASES:
        return READY_CASES[rc]
    if ct_status.startswith('status: ') and ct_status != 'status: running':
        return 'ct_down'
    return 'no_check'


def ready_failure(ready, context):
    """The message of a readiness wait that did not end ready. ready: the registered wait-ready task (rc, stdout,
    msg, stderr); context: unit, vmid, pve_host, host, port, ready_timeout, ct_status (the registered `pct status`
    task, or {} when it was not asked)."""
    if not isinstance(ready, dict) or not isinstance(context, dict):
        raise AnsibleFilterError('sglang_ready_failure: expected the registered wait-ready result and a context dict')
    rc = ready.get('rc')
    rc = rc if isinstance(rc, int) else -1
    out = str(ready.get('stdout') or '').strip()
    said = {}
    if out.startswith('{') and out.endswith('}'):
        try:
            said = json.loads(out)
        except ValueError:
            said = {}
    phase = said.get('phase', '?') if isinstance(said, dict) else '?'
    status = context.get('ct_status') or {}
    ct = str(status.get('stdout') or '').strip() or str(status.get('stderr') or '').strip()
    why = ready.get('msg') or ready.get('stderr') or ''
    journal = 'journalctl -u %s in container %s' % (context['unit'], context['vmid'])
    case = ready_case(rc, ct)
    if case == 'slow':
        return ('not ready after %s s (sglang_server_ready_timeout): /health_generate on %s:%s last: %s; the '
                "server's log: %s" % (context['ready_timeout'], context['host'], context['port'], phase, journal))
    if case == 'stopped':
        return 'the server stopped while starting (%s); why: %s' % (phase, journal)
    if case == 'no_generation':
        return 'the server is ready but its first generation failed: %s; why: %s' % (phase, journal)
    if case == 'no_listen':
        return ('the server runs but does not serve: %s (sglang_server_listen_timeout; SGLang listens once its model '
                'is loaded, so raise it if loading takes longer here); why: %s' % (phase, journal))
    rc_text = ready.get('rc', '?')
    if case == 'ct_down':
        return ('container %s is not running (%s on %s): it was stopped during the readiness wait, so the check '
                'could not run (rc %s). Find out who stopped it; the next deploy (deploy_eagle3.yml) starts it again'
                % (context['vmid'], ct, context['pve_host'], rc_text))
    return ('the readiness check could not run in container %s (rc %s: %s); `pct status %s` on %s said: %s'
            % (context['vmid'], rc_text, truncate(why, 300), context['vmid'], context['pve_host'],
               ct or '(not asked)'))


class FilterModule:
    def filters(self):
        return {'sglang_manifest': manifest, 'sglang_ready_failure': ready_failure}
