"""Prints the side-by-side table of realgpu/gpu_release_gpu.sh from the JSON results it wrote under OUT."""
import json
import os
import sys


def load(out, name):
    path = os.path.join(out, name + '.json')
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def main(out):
    rows = []
    check, release, again, story = (load(out, n) for n in ('check', 'release', 'again', 'story'))
    if check:
        res = check['release']
        rows.append('check mode: would kill %s; changed=%s; gate (one read) passed=%s'
                    % ([(k['pid'], k['signal']) for k in res['killed']], res['changed'], res['gate']['passed']))
    if release:
        res = release['release']
        gate = res.get('gate') or {}
        rows.append('gpu_release: failed=%s changed=%s killed=%s' % (
            res.get('failed', False), res['changed'], [(k['pid'], k['signal'], k['cmdline'][:40]) for k in res['killed']]))
        rows.append('  skipped_protected=%s' % [(s['pid'], s['reason'], s['cmdline'][:40]) for s in res['skipped_protected']])
        rows.append('  timings=%s gate polls=%s gate elapsed_s=%s' % (res['timings'], gate.get('polls'), gate.get('elapsed_s')))
        rows.append('  per-GPU first zero read, s into the gate: %s' % gate.get('clear_at_s'))
        nvml = release.get('nvml_gate') or {}
        if nvml and not nvml.get('skipped'):
            rows.append('  NVML v2 read after: passed=%s raw=%r msg=%s' % (nvml.get('passed'), nvml.get('raw'), nvml.get('msg', '')))
    if again:
        rows.append('second gpu_release: changed=%s killed=%s' % (again['release']['changed'], again['release']['killed']))
    print('\n'.join(rows))
    if release and story:
        res = release['release']
        print('')
        print('%-34s %-18s %-18s' % ('', 'gpu_release + gate', "story's way"))
        print('%-34s %-18s %-18s' % ('signal -> memory proven 0 (s)', res['kill_to_pass_s'], '%.3f' % story['elapsed_s']))
        print('%-34s %-18s %-18s' % ('memory reads', (res.get('gate') or {}).get('polls'), 1))
        print('%-34s %-18s %-18s' % ('reading at the end (MiB)', [g['used_mib'] for g in (res.get('gate') or {}).get('gpus', [])],
                                     story['reading'].strip()))
        print('%-34s %-18s %-18s' % ('protected exporter survived', story.get('exporter_alive_after_release'),
                                     'no: fuser -k kills it' if story.get('fuser_lists_exporter') else 'n/a'))


if __name__ == '__main__':
    main(sys.argv[1])
