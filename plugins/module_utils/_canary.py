# -*- coding: utf-8 -*-
# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The canary's verdict in a rolling deploy (docs/fleet.md, "The canary"): the first replica to restart serves live
traffic through the gateway beside a control replica still on the old config, and both /metrics pages are read every
few seconds over a bounded window. Private to this collection; the controller runs it (filter
gpuserve.sglang.sglang_canary_verdict).

The rules follow the benchmark's where they apply (docs/ab-benchmark.md): a minimum sample, a noise band from the
control's own spread (the band of the median of its per-interval figures, _bench_stats.median_band), a draft that
does not work whatever its speed, and GPU health. Figures, each over the window from the counters' increase:
- time per output token and time to first token (SGLang's histograms' _sum / _count);
- output tok/s per running request: generated tokens / the requests' summed end-to-end time, which is tok/s divided
  by the mean number running (Little's law) without sampling the num_running_reqs gauge;
- accept length: generated tokens / verify calls (SGLang counts both per finished request);
- error rate: aborted requests / finished requests.
"""

from __future__ import annotations

from ansible_collections.gpuserve.sglang.plugins.module_utils._bench_stats import median, median_band
from ansible_collections.gpuserve.sglang.plugins.module_utils._bench_verdict import DRAFT_WORKS_ABOVE
from ansible_collections.gpuserve.sglang.plugins.module_utils._sglang_metrics import MetricsError, delta, parse

PASS, FAIL, SHORT = 'pass', 'fail', 'short'
# The control's spread is the band of the median of its interval figures: fewer intervals than this give no band
MIN_INTERVALS = 3
# (figure, what it is called, unit, which way is worse)
COMPARED = (
    ('tpot_ms', 'time per output token', 'ms', 'higher'),
    ('tok_s_per_request', 'output tok/s per running request', 'tok/s', 'lower'),
    ('accept_length', 'accept length', '', 'lower'),
    ('ttft_ms', 'time to first token', 'ms', 'higher'),
)


class CanaryError(ValueError):
    """A window that cannot be judged at all (no reading of a replica's /metrics)."""


def points(rounds, url):
    """[(t, reading)] of one replica from the window's rounds ([{t, pages: {url: {status, text | error}}}], the
    sglang_canary_window module's), each page parsed (_sglang_metrics.parse). Raises CanaryError naming the first
    page that is missing, not 200 or not SGLang's."""
    out = []
    for rnd in rounds:
        page = (rnd.get('pages') or {}).get(url)
        if not page:
            raise CanaryError('%s: no /metrics reading at %s' % (url, rnd.get('t')))
        if page.get('status') != 200:
            why = page.get('error') or 'HTTP %s' % page.get('status')
            hint = (': the server runs without enable_metrics (a rollout with the canary off turns it on first)'
                    if page.get('status') == 404 else '')
            raise CanaryError('%s/metrics: %s%s' % (url, why, hint))
        try:
            out.append((float(rnd['t']), parse(page.get('text') or '')))
        except MetricsError as exc:
            raise CanaryError('%s/metrics: %s' % (url, exc))
    return out


def _ratio(num, den, scale=1.0):
    return num / den * scale if den else None


def figures(d, seconds):
    """The figures of one replica over one stretch, from its counters' increase d (_sglang_metrics.delta)."""
    requests = d.get('requests', 0.0)
    graphs = d.get('cuda_graph_passes') or {}
    decode = graphs.get('decode_cuda_graph', 0.0) + graphs.get('decode_none', 0.0)
    return {
        'seconds': round(seconds, 3),
        'requests': requests,
        'errors': d.get('aborted', 0.0),
        'error_rate_pct': _ratio(d.get('aborted', 0.0), requests, 100.0),
        'tpot_ms': _ratio(d.get('tpot_sum', 0.0), d.get('tpot_count', 0.0), 1000.0),
        'ttft_ms': _ratio(d.get('ttft_sum', 0.0), d.get('ttft_count', 0.0), 1000.0),
        'output_tok_s': _ratio(d.get('generation_tokens', 0.0), seconds),
        'tok_s_per_request': _ratio(d.get('generation_tokens', 0.0), d.get('e2e_sum', 0.0)),
        'accept_length': _ratio(d.get('generation_tokens', 0.0), d.get('verify_calls', 0.0)),
        'verify_outside_graphs_pct': _ratio(graphs.get('decode_none', 0.0), decode, 100.0),
    }


def window(pts):
    """A replica's figures over the whole window, with `intervals`: the same figures between each two readings that
    saw a request finish."""
    if len(pts) < 2:
        raise CanaryError('a window needs two readings, got %d' % len(pts))
    try:
        whole = figures(delta(pts[0][1], pts[-1][1]), pts[-1][0] - pts[0][0])
        steps = [figures(delta(a[1], b[1]), b[0] - a[0]) for a, b in zip(pts, pts[1:])]
    except MetricsError as exc:
        raise CanaryError(str(exc))
    whole['intervals'] = [s for s in steps if s['requests'] > 0]
    return whole


def band_pct(values, worse):
    """The control's own spread on the side that is worse, in % of its median: how far the band of the median of its
    interval figures reaches that way (None with fewer than MIN_INTERVALS values)."""
    vals = [v for v in values if v is not None]
    if len(vals) < MIN_INTERVALS:
        return None
    mid = median(vals)
    low, high = median_band(vals)
    if not mid:
        return None
    return (high - mid) / mid * 100.0 if worse == 'higher' else (mid - low) / mid * 100.0


def _fmt(value, unit):
    if value is None:
        return 'none'
    text = '%.2f' % value if abs(value) < 10 else '%.1f' % value
    return text + (' ' + unit if unit else '')


def _worse_pct(canary, control, worse):
    """How much worse the canary is, in % of the control (negative: better)."""
    return (canary - control) / control * 100.0 if worse == 'higher' else (control - canary) / control * 100.0


def _health_problems(health, names):
    """Each replica's GPU health after the window (gpu_memory_gate's result with memory off: its `health`, Xid events
    since the window began): a read that failed or a check under `refuse` that found something."""
    problems = []
    if health is None:  # the role's GPU health read is off
        return problems
    for role in ('canary', 'control'):
        result = health.get(role) or {}
        reading = result.get('health')
        if not isinstance(reading, dict) or not isinstance(reading.get('gpus'), list):
            problems.append('%s %s: no GPU health reading (%s)' % (role, names[role], result.get('msg') or 'not read'))
        elif not reading.get('passed'):
            problems.append('%s %s: GPU health: %s' % (role, names[role],
                                                       '; '.join(reading.get('refused') or ['refused'])))
    return problems


def verdict(canary, control, settings, health=None):
    """The canary's verdict: PASS, FAIL (with the reasons: each metric with both values and the threshold) or SHORT
    (not enough traffic to judge).

    canary, control: {name, figures (window())}; settings: min_requests, tolerance_pct, max_error_rate_pct;
    health: {canary, control} each replica's gpu_memory_gate result after the window, or None when the role reads
    none."""
    names = {'canary': canary['name'], 'control': control['name']}
    ours, theirs = canary['figures'], control['figures']
    out = {'verdict': PASS, 'reasons': [], 'compared': [], 'short': []}
    for problem in _health_problems(health, names):
        out['reasons'].append({'metric': 'gpu_health', 'message': problem})
    need = int(settings['min_requests'])
    for role, fig in (('canary', ours), ('control', theirs)):
        if fig['requests'] < need:
            out['short'].append('%s %s finished %d requests in the %.0f s window, fewer than min_requests %d'
                                % (role, names[role], fig['requests'], fig['seconds'], need))
    if len(theirs['intervals']) < MIN_INTERVALS:
        out['short'].append('the control %s saw requests finish in %d of the window\'s intervals: its own spread '
                            'needs %d' % (names['control'], len(theirs['intervals']), MIN_INTERVALS))
    if out['reasons']:
        out['verdict'] = FAIL
        return out
    if out['short']:
        out['verdict'] = SHORT
        return out
    tolerance = float(settings['tolerance_pct'])
    for key, label, unit, worse in COMPARED:
        mine, ref = ours.get(key), theirs.get(key)
        if key == 'accept_length' and ref is not None and ref > DRAFT_WORKS_ABOVE and mine is not None \
                and mine <= DRAFT_WORKS_ABOVE:
            out['reasons'].append({
                'metric': key, 'canary': mine, 'control': ref, 'threshold': DRAFT_WORKS_ABOVE,
                'message': 'accept length: canary %s %.2f, control %s %.2f: the canary\'s draft is not working '
                           '(at most %.2f), whatever its speed: check the algorithm and the draft'
                           % (names['canary'], mine, names['control'], ref, DRAFT_WORKS_ABOVE)})
            continue
        if mine is None or ref is None or not ref:
            out['compared'].append('%s: canary %s, control %s: not compared'
                                   % (label, _fmt(mine, unit), _fmt(ref, unit)))
            continue
        spread = band_pct([i.get(key) for i in theirs['intervals']], worse)
        threshold = max(tolerance, spread or 0.0)
        worse_pct = _worse_pct(mine, ref, worse)
        line = ('%s: canary %s %s, control %s %s, %s %.1f %%, threshold %.1f %% (tolerance_pct %.1f, the '
                'control\'s own spread %s)' % (label, names['canary'], _fmt(mine, unit), names['control'],
                                               _fmt(ref, unit), 'worse by' if worse_pct > 0 else 'better by',
                                               abs(worse_pct), threshold, tolerance,
                                               'unknown' if spread is None else '%.1f %%' % spread))
        if worse_pct > threshold:
            out['reasons'].append({'metric': key, 'canary': mine, 'control': ref, 'threshold_pct': threshold,
                                   'worse_pct': worse_pct, 'message': line})
        else:
            out['compared'].append(line)
    limit = float(settings['max_error_rate_pct'])
    mine, ref = ours['error_rate_pct'] or 0.0, theirs['error_rate_pct'] or 0.0
    line = ('error rate: canary %s %.2f %% (%d of %d aborted), control %s %.2f %%, threshold %.2f points above the '
            'control (max_error_rate_pct)' % (names['canary'], mine, ours['errors'], ours['requests'],
                                              names['control'], ref, limit))
    if mine - ref > limit:
        out['reasons'].append({'metric': 'error_rate_pct', 'canary': mine, 'control': ref, 'threshold': limit,
                               'message': line})
    else:
        out['compared'].append(line)
    if out['reasons']:
        out['verdict'] = FAIL
    return out


def judge(rounds, canary, control, settings, health=None):
    """The whole verdict of one window: canary and control are {name, url}; rounds the window's readings of both
    (sglang_canary_window's `rounds`, several windows' concatenated). Adds each replica's figures, `summary` (one
    line naming the verdict and every failed metric with both values and its threshold) and `seconds`. A window
    that cannot be read at all (a page missing, not 200, not SGLang's, a counter that went down) is a FAIL."""
    try:
        sides = [dict(r, figures=window(points(rounds, r['url']))) for r in (canary, control)]
    except CanaryError as exc:
        result = {'verdict': FAIL, 'compared': [], 'short': [], 'figures': {},
                  'reasons': [{'metric': 'metrics', 'message': 'the window could not be read: %s' % exc}]}
        result['summary'] = '%s: FAIL: %s' % (_head(canary, control, rounds), result['reasons'][0]['message'])
        return result
    result = verdict(sides[0], sides[1], settings, health)
    result['figures'] = {'canary': sides[0]['figures'], 'control': sides[1]['figures']}
    head = _head(canary, control, rounds)
    if result['verdict'] == FAIL:
        result['summary'] = '%s: FAIL: %s' % (head, '; '.join(r['message'] for r in result['reasons']))
    elif result['verdict'] == SHORT:
        result['summary'] = '%s: NOT ENOUGH TRAFFIC: %s' % (head, '; '.join(result['short']))
    else:
        result['summary'] = '%s: PASS: %s' % (head, '; '.join(result['compared']))
    return result


def _head(canary, control, rounds):
    seconds = float(rounds[-1]['t']) - float(rounds[0]['t']) if len(rounds) > 1 else 0.0
    return 'canary %s against control %s over %.0f s (%d readings)' % (
        canary['name'], control['name'], seconds, len(rounds))
