# -*- coding: utf-8 -*-
# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One reading of an SGLang server's /metrics page (--enable-metrics), parsed by prometheus_client's own text
parser, as the figures a rolling deploy's canary compares. Private to this collection; the controller reads it (the
canary's filter), so prometheus_client is imported where a page is parsed, not at load.

The names, types and labels are SGLang 0.5.23's (srt/observability/metrics_collector.py): the tokenizer's counters
and histograms (TokenizerMetricsCollector, labels model_name and engine_type, some also is_streaming) and the
scheduler's CUDA-graph counter (SchedulerMetricsCollector, labels model_name, engine_type, tp_rank, pp_rank,
moe_ep_rank, and mode). No real page has been captured yet: they come from that
source, and the lab's stand-in serves the same (tests/unit/lab/test_sglang_standin_metrics.py).
"""

from __future__ import annotations

# SGLang name -> (the parser's family type, what a reading calls it). A counter's family drops "_total".
COUNTERS = {
    'sglang:generation_tokens_total': 'generation_tokens',   # per finished request, its completion tokens
    'sglang:spec_verify_calls_total': 'verify_calls',        # per finished request, its spec_verify_ct
    'sglang:num_requests_total': 'requests',                 # per finished request, aborted ones too
    'sglang:num_aborted_requests_total': 'aborted',          # per abort sent to the scheduler
    'sglang:cuda_graph_passes_total': 'cuda_graph_passes',   # per decode/verify or prefill step, by {mode}
}
HISTOGRAMS = {
    'sglang:time_to_first_token_seconds': 'ttft',
    # (finished - first token) / (completion tokens - 1), per request that stopped or hit its length
    'sglang:request_time_per_output_token_seconds': 'tpot',
    # per finished request: its _sum over a window is the time requests were running in it (Little's law gives the
    # mean number running; the sglang:num_running_reqs gauge is a snapshot of the scheduler's last logged step)
    'sglang:e2e_request_latency_seconds': 'e2e',
}


class MetricsError(ValueError):
    """A /metrics page that cannot be read as SGLang's: not the format, or a known name of another type."""


def _family_names():
    names = {}
    for name, key in COUNTERS.items():
        # the parser names a counter's family without "_total"; a family of another type keeps it
        names[name[:-len('_total')]] = names[name] = ('counter', name, key)
    for name, key in HISTOGRAMS.items():
        names[name] = ('histogram', name, key)
    return names


FAMILIES = _family_names()


def parse(text):
    """{key: value} of one page: each counter summed over its label sets (cuda_graph_passes as {mode: value}),
    each histogram as key_sum and key_count. A name SGLang has not exported yet (a counter appears once a request
    incremented it) is left out. Raises MetricsError."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError as exc:  # a controller without the pinned requirement
        raise MetricsError('prometheus_client is missing on the controller (requirements.txt pins it): %s' % exc)
    reading = {}
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as exc:  # the parser raises ValueError and others on a page that is not the format
        raise MetricsError('not a Prometheus text page: %s: %s' % (type(exc).__name__, exc))
    for family in families:
        known = FAMILIES.get(family.name)
        if known is None:
            continue
        kind, name, key = known
        if family.type != kind:
            raise MetricsError('%s is a %s, not a %s as in SGLang 0.5.23' % (name, family.type, kind))
        for sample in family.samples:
            if kind == 'counter' and sample.name == name:
                if key == 'cuda_graph_passes':
                    modes = reading.setdefault(key, {})
                    mode = sample.labels.get('mode', '')
                    modes[mode] = modes.get(mode, 0.0) + sample.value
                else:
                    reading[key] = reading.get(key, 0.0) + sample.value
            elif kind == 'histogram' and sample.name in (name + '_sum', name + '_count'):
                part = key + sample.name[len(name):]
                reading[part] = reading.get(part, 0.0) + sample.value
    return reading


def delta(before, after):
    """The counters' and histograms' increase from one reading to a later one ({key: after - before}, a name absent
    from a reading counting 0, cuda_graph_passes per mode). Raises MetricsError when one went down: the server
    restarted between the two, so the window means nothing."""
    out = {}
    keys = set(before) | set(after)
    for key in sorted(keys):
        if key == 'cuda_graph_passes':
            a, b = before.get(key) or {}, after.get(key) or {}
            out[key] = {}
            for mode in sorted(set(a) | set(b)):
                out[key][mode] = b.get(mode, 0.0) - a.get(mode, 0.0)
                if out[key][mode] < 0:
                    raise MetricsError('cuda_graph_passes{mode=%s} went down (%s -> %s): the server restarted '
                                       'within the window' % (mode, a.get(mode, 0.0), b.get(mode, 0.0)))
            continue
        out[key] = after.get(key, 0.0) - before.get(key, 0.0)
        if out[key] < 0:
            raise MetricsError('%s went down (%s -> %s): the server restarted within the window'
                               % (key, before.get(key, 0.0), after.get(key, 0.0)))
    return out


def _read_names():
    return tuple(sorted(COUNTERS)) + tuple(name[:-len('_total')] for name in sorted(COUNTERS)) + tuple(
        sorted(HISTOGRAMS))


def trim(text):
    """The lines of a page that belong to the metrics read here (their HELP and TYPE lines and samples), so that a
    window of a real server's pages (hundreds of metrics, thousands of histogram buckets) travels back small; the
    page is parsed on the controller (parse). Selects by name only: what a line means is left to the parser."""
    names = _read_names()
    keep = []
    for line in text.splitlines():
        if line.startswith('# HELP ') or line.startswith('# TYPE '):
            name = line[7:].split(' ', 1)[0]
            if name in names:
                keep.append(line)
        elif any(line.startswith(n) and line[len(n):len(n) + 1] in ('{', ' ', '_') for n in names):
            keep.append(line)
    return '\n'.join(keep) + '\n'


def read_window(urls, seconds, interval, fetch, clock, sleep):
    """Every url's page read together at the start and every `interval` seconds until `seconds` have passed (the last
    reading at the end): [{t, pages: {url: {status, text} or {status, error}}}]. fetch(url) returns (status, text)
    or raises OSError; clock() is the epoch; sleep(s) waits."""
    rounds = []
    start = clock()
    step = 0
    while True:
        t = clock()
        pages = {}
        for url in urls:
            try:
                status, text = fetch(url.rstrip('/') + '/metrics')
                pages[url] = {'status': status, 'text': trim(text) if status == 200 else text[:500]}
            except OSError as exc:
                pages[url] = {'status': None, 'error': 'GET %s/metrics failed: %s' % (url.rstrip('/'), exc)}
        rounds.append({'t': t, 'pages': pages})
        if t - start >= seconds:
            return rounds
        step += 1
        sleep(max(0.0, min(start + step * interval, start + seconds) - clock()))
