"""Parsers and readers of nvidia-smi output, fed the real H200 captures and malformed variants of them: the messages an
operator reads, exactly, what SmiError carries, the NVML edges."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _nvidia_smi as smi
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Result, Runner

from ansible_collections.gpuserve.sglang.tests.support.nvidia_smi import UUID, FakeNvml, capture, four_fields


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


OTHER = 'GPU-00000001-aaaa-bbbb-cccc-dddddddddddd'


def test_smi_error_carries_everything():
    err = smi.SmiError('m', 'raw', 3, 'stderr', 'cmd')
    assert str(err) == 'm' and err.args == ('m',)
    assert (err.msg, err.raw, err.rc, err.stderr, err.cmd) == ('m', 'raw', 3, 'stderr', 'cmd')


def test_smi_error_defaults():
    err = smi.SmiError('only a message')
    assert str(err) == 'only a message'
    assert (err.msg, err.raw, err.rc, err.stderr, err.cmd) == ('only a message', '', None, '', '')


def test_check_result_timeout_message_and_fields():
    res = Result(['/bin/timeout', '10s', 'nvidia-smi'], 124, 'partial', 'err text')
    with pytest.raises(smi.SmiError) as exc:
        smi.check_result(res, 'nvidia-smi --query-compute-apps')
    err = exc.value
    assert err.msg == ('nvidia-smi --query-compute-apps did not answer within its timeout (rc 124): the driver may be '
                       'stuck; check dmesg for Xid errors and whether other nvidia-smi calls hang')
    assert (err.raw, err.rc, err.stderr, err.cmd) == ('partial', 124, 'err text', '/bin/timeout 10s nvidia-smi')


def test_check_result_failure_message_and_fields():
    rc, out = capture('bad_index')[:2]
    res = Result(['nvidia-smi', '-i', '7'], rc, out, 'on stderr\n')
    with pytest.raises(smi.SmiError) as exc:
        smi.check_result(res, 'nvidia-smi')
    assert exc.value.msg == ('nvidia-smi failed (rc 6): nvidia-smi sees no GPU: check `nvidia-smi -L`, the /dev/nvidia* '
                             'nodes and, in a container, the device passthrough; output: No devices were found\non stderr')
    assert (exc.value.raw, exc.value.rc, exc.value.stderr, exc.value.cmd) == (out, 6, 'on stderr\n', 'nvidia-smi -i 7')


def test_check_result_diagnoses_stderr_too():
    res = Result(['nvidia-smi'], 9, '', "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    with pytest.raises(smi.SmiError, match='check that the nvidia kernel module is loaded'):
        smi.check_result(res, 'nvidia-smi')


def test_check_result_rc_zero_passes_even_with_error_text():
    assert smi.check_result(Result(['x'], 0, 'No devices were found', ''), 'nvidia-smi') is None


def test_diagnose_exact():
    assert smi.diagnose('  something new \n') == "unexpected output: 'something new'"
    assert smi.diagnose('Field "x" is not a valid field to query.\n\n') == (
        'this nvidia-smi does not know a queried field: the driver is older than this collection expects; upgrade it; '
        'output: Field "x" is not a valid field to query.')
    # first match wins: a version mismatch also says "Failed to initialize NVML"
    assert smi.diagnose('Failed to initialize NVML: Driver/library version mismatch').startswith(
        'the loaded kernel module and the NVIDIA userspace differ')


@pytest.mark.parametrize('text, msg', [
    ('0, %s, 0\n' % UUID, "unparseable nvidia-smi line '0, %s, 0': expected 4 fields, got 3" % UUID),
    ('0, %s, 0, 1, 2\n' % UUID, "unparseable nvidia-smi line '0, %s, 0, 1, 2': expected 4 fields, got 5" % UUID),
    ('x, %s, 0, 143771\n' % UUID, "unparseable nvidia-smi line 'x, %s, 0, 143771': index 'x' is not a number" % UUID),
    ('0, NVIDIA H200, 0, 143771', "unparseable nvidia-smi line '0, NVIDIA H200, 0, 143771': uuid 'NVIDIA H200' is not a GPU UUID"),
    ('0, %s, 1.5, 143771' % UUID, "unparseable nvidia-smi line '0, %s, 1.5, 143771': memory.used '1.5' is not a whole number of MiB" % UUID),
    ('0, %s, 0, 14e3' % UUID, "unparseable nvidia-smi line '0, %s, 0, 14e3': memory.total '14e3' is not a whole number of MiB" % UUID),
    ('0, %s, [N/A], 143771' % UUID, "unparseable nvidia-smi line '0, %s, [N/A], 143771': memory.used is [N/A]: no figure, so the GPU "
     "cannot be proven free (MIG mode, a GPU fallen off the bus, or a driver fault)" % UUID),
])
def test_parse_gpus_exact_messages(text, msg):
    with pytest.raises(smi.SmiError) as exc:
        smi.parse_gpus(text)
    assert exc.value.msg == msg and exc.value.raw == text
    assert exc.value.__cause__ is None and exc.value.__suppress_context__


def test_parse_gpus_no_gpu_and_twice_exact():
    with pytest.raises(smi.SmiError) as exc:
        smi.parse_gpus('\n')
    assert exc.value.msg == 'nvidia-smi listed no GPU at all: check `nvidia-smi -L` and the device passthrough'
    assert exc.value.raw == '\n'
    text = '1, %s, 0, 10\n0, %s, 0, 10\n1, %s, 0, 10\n' % (UUID, OTHER, UUID)
    with pytest.raises(smi.SmiError) as exc:
        smi.parse_gpus(text)
    assert exc.value.msg == 'GPU index 1 is listed twice: the output cannot be trusted' and exc.value.raw == text


def test_parse_gpus_skips_blank_lines_between_gpus():
    text = '0, %s, 5, 10\n\n   \n1, %s, 6, 11\n' % (UUID, OTHER)
    assert smi.parse_gpus(text) == [dict(index=0, uuid=UUID, used_mib=5, total_mib=10),
                                    dict(index=1, uuid=OTHER, used_mib=6, total_mib=11)]


def test_parse_gpus_mig_uuid_and_padding():
    mig = 'MIG-8b2c3d4e-0000-1111-2222-333344445555'
    assert smi.parse_gpus('  12 ,%s,   0,  97871  \n' % mig) == [dict(index=12, uuid=mig, used_mib=0, total_mib=97871)]


def test_select_exact_messages_and_raw():
    with pytest.raises(smi.SmiError) as exc:
        smi.select(gpus(1, 2, 3), [9, 1, 5, 9], None, 'the raw')
    assert exc.value.msg == ('GPU index(es) [5, 9] not listed by nvidia-smi (it lists [0, 1, 2]): check the selection and '
                             '`nvidia-smi -L`')
    assert exc.value.raw == 'the raw'
    with pytest.raises(smi.SmiError) as exc:
        smi.select(gpus(1, 2, 3), [0], 4, 'raw 2')
    assert exc.value.msg == ('nvidia-smi lists 3 GPU(s), 4 expected: a GPU fell off the bus, the driver lost one, or '
                             'expected_count is wrong')
    assert exc.value.raw == 'raw 2'


def test_select_sorts_and_dedups():
    listed = gpus(1, 2, 3)
    picked = smi.select(listed, [2, 0, 2], None, '')
    assert picked == [listed[0], listed[2]]
    assert smi.select(listed, [], 3, '') == listed
    assert smi.select(listed, None, None, '') == listed


def test_parse_apps_edges():
    text = ('garbage\n'
            '%s, 11, 100\n'                   # exactly the three queried fields
            '%s, pid?, 5\n'                   # pid not a number: dropped
            '%s, 12\n'                        # cut off: dropped
            '%s, 13, [N/A], python3\n'
            '%s, 14, 7, python3, extra\n') % (UUID, UUID, UUID, OTHER, OTHER)
    assert smi.parse_apps(text) == [dict(uuid=UUID, pid=11, used_mib=100), dict(uuid=OTHER, pid=13, used_mib=None),
                                    dict(uuid=OTHER, pid=14, used_mib=7)]


class Module:
    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    def get_bin_path(self, name, required=False):
        return '/usr/bin/' + name

    def run_command(self, argv, **kwargs):
        self.calls.append(argv)
        return self.answers.pop(0)


def test_smi_reader_defaults_and_read():
    module = Module((0, four_fields(3), 'a warning'))
    reader = smi.SmiReader(Runner(module))
    assert reader.read() == ([dict(index=0, uuid=UUID, used_mib=3, total_mib=143771)], four_fields(3))
    assert module.calls == [['/usr/bin/timeout', '--kill-after=1', '10s', 'nvidia-smi',
                             '--query-gpu=index,uuid,memory.used,memory.total', '--format=csv,noheader,nounits']]
    assert reader.close() is None


def test_smi_reader_parse_error_gets_rc_stderr_cmd():
    module = Module((0, four_fields('[N/A]'), 'warn'))
    reader = smi.SmiReader(Runner(module), '/opt/nvidia-smi', 2.5)
    with pytest.raises(smi.SmiError) as exc:
        reader.read()
    err = exc.value
    assert 'memory.used is [N/A]' in err.msg and err.raw == four_fields('[N/A]')
    assert (err.rc, err.stderr) == (0, 'warn')
    assert err.cmd == ('/usr/bin/timeout --kill-after=1 2.5s /opt/nvidia-smi --query-gpu=index,uuid,memory.used,memory.total '
                       '--format=csv,noheader,nounits')


def test_smi_reader_failed_read_is_named_nvidia_smi():
    reader = smi.SmiReader(Runner(Module((9, "couldn't communicate with the NVIDIA driver", ''))))
    with pytest.raises(smi.SmiError, match=r'^nvidia-smi failed \(rc 9\): nvidia-smi cannot reach the driver'):
        reader.read()


def test_smi_reader_apps():
    module = Module((0, capture('apps_busy')[1], ''))
    reader = smi.SmiReader(Runner(module), timeout=4)
    assert reader.apps() == [dict(uuid=UUID, pid=434, used_mib=8802)]
    assert module.calls == [['/usr/bin/timeout', '--kill-after=1', '4s', 'nvidia-smi',
                             '--query-compute-apps=gpu_uuid,pid,used_memory', '--format=csv,noheader,nounits']]
    reader = smi.SmiReader(Runner(Module((124, '', ''))))
    with pytest.raises(smi.SmiError, match=r'^nvidia-smi --query-compute-apps did not answer within its timeout \(rc 124\)'):
        reader.apps()


class IndexedNvml(FakeNvml):
    """Handles that are not the GPU index (NVML orders by PCI bus id; the index may differ), str UUIDs."""

    def nvmlDeviceGetHandleByIndex(self, i):
        return 'handle-%d' % i

    def nvmlDeviceGetIndex(self, h):
        return int(h.split('-')[1]) + 4

    def nvmlDeviceGetUUID(self, h):
        return 'GPU-%08d-0000-0000-0000-000000000000' % int(h.split('-')[1])

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        return super().nvmlDeviceGetMemoryInfo(int(h.split('-')[1]), version=version)


def test_nvml_read_index_uuid_and_figures():
    nvml = IndexedNvml([3 * smi.MIB - 1, 0])
    listed, raw = smi.NvmlReader(nvml).read()
    assert listed == [dict(index=4, uuid='GPU-00000000-0000-0000-0000-000000000000', used_mib=2, total_mib=143771),
                      dict(index=5, uuid='GPU-00000001-0000-0000-0000-000000000000', used_mib=0, total_mib=143771)]
    assert raw == ('4, GPU-00000000-0000-0000-0000-000000000000, 2, 143771\n'
                   '5, GPU-00000001-0000-0000-0000-000000000000, 0, 143771\n')


def test_nvml_no_gpu_fails_closed():
    with pytest.raises(smi.SmiError, match='listed no GPU at all'):
        smi.NvmlReader(FakeNvml([])).read()


def test_nvml_refusal_exact():
    with pytest.raises(smi.SmiError) as exc:
        smi.NvmlReader(FakeNvml([0], v2=False))
    assert exc.value.msg == ('this nvidia-ml-py has no nvmlMemory_v2: v1 memory info counts reserved memory and never reads 0; '
                             'upgrade nvidia-ml-py or use backend=nvidia-smi')


class FailingNvml(FakeNvml):
    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        raise self.NVMLError('GPU is lost')

    def nvmlShutdown(self):
        self.calls.append('shutdown')
        raise self.NVMLError('Uninitialized')


def test_nvml_call_error_exact_and_close_swallows():
    nvml = FailingNvml([0])
    reader = smi.NvmlReader(nvml)
    with pytest.raises(smi.SmiError) as exc:
        reader.read()
    assert exc.value.msg == "NVML nvmlDeviceGetMemoryInfo failed: GPU is lost: unexpected output: 'GPU is lost'"
    assert exc.value.raw == 'GPU is lost' and exc.value.__suppress_context__
    assert reader.close() is None
    assert nvml.calls == ['init', 'shutdown']


def test_nvml_call_error_on_a_callable_without_name():
    nvml = FakeNvml([0])
    reader = smi.NvmlReader(nvml)

    class Callable:
        def __call__(self, *args, **kwargs):
            raise nvml.NVMLError('boom %s %s' % (args, kwargs))

        def __repr__(self):
            return '<callable>'

    with pytest.raises(smi.SmiError) as exc:
        reader._call(Callable(), 1, k=2)
    assert exc.value.msg == "NVML <callable> failed: boom (1,) {'k': 2}: unexpected output: \"boom (1,) {'k': 2}\""
    assert reader._call(lambda a, b=0: a + b, 1, b=2) == 3


# ------------------------------------------------------------------------------------------- the one argv builder

def test_query_builds_every_query_the_collection_makes():
    # the argv docs/CONVENTIONS.md lists, which the lab stand-in answers byte-compatibly
    assert smi.query('/usr/bin/nvidia-smi', 'gpu', ('index', 'pstate')) == [
        '/usr/bin/nvidia-smi', '--query-gpu=index,pstate', '--format=csv,noheader,nounits']
    assert smi.query('nvidia-smi', 'compute-apps', ('pid',), units=True, ids=(0, 3)) == [
        'nvidia-smi', '--query-compute-apps=pid', '--format=csv,noheader', '--id=0,3']
    assert smi.query('nvidia-smi', 'gpu', ('index',), ids=[7]) == [
        'nvidia-smi', '--query-gpu=index', '--format=csv,noheader,nounits', '--id=7']
    assert smi.driver_query('nvidia-smi') == ['nvidia-smi', '--query-gpu=driver_version', '--format=csv,noheader']
    assert smi.driver_query('smi', [1, 2]) == ['smi', '--query-gpu=driver_version', '--format=csv,noheader', '--id=1,2']
    assert smi.version_count_query('/opt/smi') == ['/opt/smi', '--query-gpu=driver_version,count',
                                                   '--format=csv,noheader']
    assert smi.list_query('/opt/smi') == ['/opt/smi', '-L']


@pytest.mark.parametrize('text, version', [
    ('580.159.04\n', '580.159.04'),
    ('580.159.04\n580.159.04\n\n  580.159.04  \n', '580.159.04'),
    ('9.1\n', '9.1'),  # a version starts with a digit, however many the major has
    ('580.159.04, 8\n580.159.04, 8\n', '580.159.04'),  # the driver_version,count query
    # /proc/driver/nvidia/version: the loaded kernel module's
    ('NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)\nGCC version: 15\n',
     '580.159.04'),
    ('NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n', '535.104.05'),
    ('NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86 Release\n', '570.86'),
])
def test_parse_driver_version_reads_the_one_version(text, version):
    assert smi.parse_driver_version(text) == version


@pytest.mark.parametrize('text', [
    '', '\n \n', '580.159.04\n575.57.08\n', '[N/A]\n', 'No devices were found\n', '580.159.04, 8\n575.57.08, 8\n',
    'NVRM version: NVIDIA UNIX Kernel Module  580.159.04\n',  # no space after: not the /proc line's layout
    '  NVRM version: x 580.159.04 Release\n',
])
def test_parse_driver_version_refuses_anything_but_one_version(text):
    with pytest.raises(smi.SmiError) as exc:
        smi.parse_driver_version(text)
    assert exc.value.msg == ('nvidia-smi driver_version query gave %r: expected one version for every GPU' % text)
    assert exc.value.raw == text
    long_text = '1.0\n2.0\n' + 'x' * 600
    with pytest.raises(smi.SmiError) as exc:
        smi.parse_driver_version(long_text)
    assert exc.value.msg.endswith('%r: expected one version for every GPU' % long_text[:500])


@pytest.mark.parametrize('text, version', [
    ('Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95\n', '580.95'),
    ('NVML library version:580.95.05', '580.95.05'),
    ('Failed to initialize NVML: Driver/library version mismatch\n', None),
    ('NVML library version: unknown', None),
])
def test_the_nvml_library_version_after_a_mismatch(text, version):
    assert smi.parse_nvml_library_version(text) == version


def test_the_mismatch_text_is_one_pattern():
    assert smi.MISMATCH_RE.search('failed: DRIVER/LIBRARY VERSION MISMATCH')
    assert smi.DIAGNOSES[0][0] is smi.MISMATCH_RE
