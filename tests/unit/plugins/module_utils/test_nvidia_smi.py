"""Parsers of nvidia-smi output, fed the real H200 captures and malformed variants of them."""
import os

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _nvidia_smi as smi
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Result

FIX = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'nvidia-smi-h200')


def capture(name):
    def read(ext):
        with open(os.path.join(FIX, name + '.' + ext)) as f:
            return f.read()
    return int(read('rc').strip()), read('out'), read('err')


def four_fields(used):
    """The gate's query, built from the real full capture (index, uuid, name, used, total, ...)."""
    fields = [f.strip() for f in capture('gpu_full_idle')[1].split(',')]
    return '%s, %s, %s, %s\n' % (fields[0], fields[1], used, fields[4])


UUID = 'GPU-553de4da-dd63-7f3a-8989-418ea85fc9f7'


def test_queries_are_the_documented_ones():
    assert smi.gpu_query('nvidia-smi') == [
        'nvidia-smi', '--query-gpu=index,uuid,memory.used,memory.total', '--format=csv,noheader,nounits']
    assert smi.apps_query('/usr/bin/nvidia-smi') == [
        '/usr/bin/nvidia-smi', '--query-compute-apps=gpu_uuid,pid,used_memory', '--format=csv,noheader,nounits']


def test_parse_idle_and_busy_h200():
    assert smi.parse_gpus(four_fields(0)) == [dict(index=0, uuid=UUID, used_mib=0, total_mib=143771)]
    busy = capture('gpu_busy')[1].split(',')[1].strip()  # the real busy figure, 8811
    assert smi.parse_gpus(four_fields(busy))[0]['used_mib'] == 8811


def test_parse_eight_gpus_out_of_order():
    text = ''.join('%d, GPU-0000000%d-aaaa-bbbb-cccc-dddddddddddd, %d, 143771\n' % (i, i, i) for i in (3, 0, 7, 1, 2, 4, 5, 6))
    gpus = smi.parse_gpus(text)
    assert [g['index'] for g in gpus] == [3, 0, 7, 1, 2, 4, 5, 6]
    assert gpus[2]['used_mib'] == 7


@pytest.mark.parametrize('text, needle', [
    (four_fields('[N/A]'), 'memory.used is [N/A]: no figure'),
    (four_fields('[Not Supported]'), 'memory.used is [Not Supported]: no figure'),
    ('0, %s, 0, [Unknown Error]\n' % UUID, 'memory.total is [Unknown Error]: no figure'),
    ('0, %s, 0\n' % UUID, 'expected 4 fields'),                   # partial line
    (four_fields(0) + '1, GPU-aa\n', 'expected 4 fields'),         # second line cut off
    ('0, %s, 12.5, 143771\n' % UUID, 'whole number'),
    ('0, %s, -1, 143771\n' % UUID, 'whole number'),
    ('x, %s, 0, 143771\n' % UUID, 'not a number'),
    ('0, NVIDIA H200, 0, 143771\n', 'not a GPU UUID'),
    (capture('gpu_header')[1], 'unparseable'),                     # real --format=csv with header and units
    (capture('gpu_idle')[1], 'expected 4 fields'),                 # real two-field answer to another query
    (capture('gpu_full_idle')[1], 'expected 4 fields'),
    (four_fields(0) + four_fields(0), 'listed twice'),
    ('', 'no GPU at all'),
    ('\n  \n', 'no GPU at all'),
])
def test_parse_fails_closed_with_raw(text, needle):
    with pytest.raises(smi.SmiError) as err:
        smi.parse_gpus(text)
    assert needle in err.value.msg
    assert err.value.raw == text


def gpus(*used):
    return [dict(index=i, uuid='GPU-%d' % i, used_mib=u, total_mib=100) for i, u in enumerate(used)]


def test_select():
    assert smi.select(gpus(1, 2, 3), [], None, '') == gpus(1, 2, 3)
    assert [g['index'] for g in smi.select(gpus(1, 2, 3), [2, 0, 2], 3, '')] == [0, 2]
    with pytest.raises(smi.SmiError, match=r'index\(es\) \[5\] not listed'):
        smi.select(gpus(1, 2, 3), [1, 5], None, 'raw')
    with pytest.raises(smi.SmiError, match='lists 3 GPU.*8 expected'):
        smi.select(gpus(1, 2, 3), [], 8, 'raw')
    with pytest.raises(smi.SmiError, match='lists 3 GPU.*2 expected'):
        smi.select(gpus(1, 2, 3), [0], 2, 'raw')


def test_parse_apps_real_capture_and_idle():
    rc, out, err = capture('apps_busy')  # captured with process_name appended: ignored
    assert smi.parse_apps(out) == [dict(uuid=UUID, pid=434, used_mib=8802)]
    assert smi.parse_apps(capture('apps_idle')[1]) == []
    assert smi.parse_apps('%s, 77, [N/A]\ngarbage\n' % UUID) == [dict(uuid=UUID, pid=77, used_mib=None)]


@pytest.mark.parametrize('name, needle', [
    ('bad_index', 'sees no GPU'),
    ('bad_field', 'does not know a queried field'),
])
def test_check_result_real_errors(name, needle):
    rc, out, err = capture(name)
    with pytest.raises(smi.SmiError) as exc:
        smi.check_result(Result(['nvidia-smi'], rc, out, err), 'nvidia-smi')
    assert needle in exc.value.msg and 'rc %d' % rc in exc.value.msg
    assert exc.value.raw == out


@pytest.mark.parametrize('rc, out, needle', [
    (18, 'Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.159\n',
     'reboot the host'),
    (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", 'kernel module is loaded'),
    (124, '', 'did not answer within its timeout'),
    (137, '', 'did not answer within its timeout'),
    (3, 'something new\n', "unexpected output: 'something new'"),
])
def test_check_result_diagnoses(rc, out, needle):
    with pytest.raises(smi.SmiError, match=needle.replace('(', r'\(')) as exc:
        smi.check_result(Result(['nvidia-smi'], rc, out, ''), 'nvidia-smi')
    assert exc.value.rc == rc


@pytest.mark.parametrize('text', ['No devices found.\n', 'No devices were found\n'])
def test_both_texts_of_no_gpu_are_diagnosed(text):
    # driver 580's `-L` and query texts for a host or container where no GPU's node is usable (real captures in
    # tests/fixtures/nvidia-h200-minor/)
    assert smi.diagnose(text) == ('nvidia-smi sees no GPU: check `nvidia-smi -L`, the /dev/nvidia* nodes and, in a '
                                  'container, the device passthrough; output: %s' % text.strip())


def test_check_result_judges_by_exit_status_not_by_stderr():
    # nvidia-smi prints warnings on stderr and still exits 0: that is a good read; any non-zero exit is not
    assert smi.check_result(Result(['x'], 0, four_fields(0), 'WARNING: infoROM is corrupted at gpu 0000:18:00.0\n'),
                            'nvidia-smi') is None
    with pytest.raises(smi.SmiError, match='failed'):
        smi.check_result(Result(['x'], 1, four_fields(0), ''), 'nvidia-smi')


class Mem:
    def __init__(self, used, total):
        self.used, self.total = used, total


class FakeNvml:
    """The slice of nvidia-ml-py the NVML reader uses; v1 figures differ so a v1 read would show."""

    class NVMLError(Exception):
        pass

    def __init__(self, used_bytes, fail=None, v2=True):
        self.used, self.fail, self.calls = used_bytes, fail, []
        if v2:
            self.nvmlMemory_v2 = 0x02000028

    def nvmlInit(self):
        self.calls.append('init')
        if self.fail == 'init':
            raise self.NVMLError('Driver/library version mismatch')

    def nvmlShutdown(self):
        self.calls.append('shutdown')

    def nvmlDeviceGetCount(self):
        return len(self.used)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetIndex(self, h):
        return h

    def nvmlDeviceGetUUID(self, h):
        return ('GPU-%08d-0000-0000-0000-000000000000' % h).encode()

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        if version is None or version != self.nvmlMemory_v2:
            return Mem(self.used[h] + 615 * smi.MIB, 150754820096)  # v1: reserved included
        return Mem(self.used[h], 150754820096)


def test_nvml_reader_uses_v2_only():
    nvml = FakeNvml([0, 5 * smi.MIB + 1])
    reader = smi.NvmlReader(nvml)
    gpus, raw = reader.read()
    assert [(g['index'], g['used_mib'], g['total_mib']) for g in gpus] == [(0, 0, 143771), (1, 5, 143771)]
    assert raw.startswith('0, GPU-00000000-0000-0000-0000-000000000000, 0, 143771\n')
    reader.close()
    assert nvml.calls == ['init', 'shutdown']


def test_nvml_reader_refuses_without_v2():
    with pytest.raises(smi.SmiError, match='no nvmlMemory_v2'):
        smi.NvmlReader(FakeNvml([0], v2=False))


def test_nvml_errors_fail_closed():
    with pytest.raises(smi.SmiError, match='NVML nvmlInit failed.*version mismatch.*reboot'):
        smi.NvmlReader(FakeNvml([0], fail='init'))
