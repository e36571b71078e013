"""_gpu_map: nvidia-smi index <-> /dev/nvidiaN minor, on the real H200 captures and on a host where they differ."""
import os
import shutil

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _gpu_map as gm

from ansible_collections.gpuserve.sglang.tests.support.gpu_map import exactly, info_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
CAPTURES = os.path.join(ROOT, 'tests', 'fixtures', 'nvidia-h200-minor')
UUID0 = 'GPU-0c10bfa4-4b69-7a17-b502-2287a69f3ae6'
UUID1 = 'GPU-5b7d9803-944c-ef68-8324-0963f2eaf549'


def capture(name):
    with open(os.path.join(CAPTURES, name)) as f:
        return f.read()


@pytest.fixture
def proc_root(tmp_path):
    """The real H200's /proc/driver/nvidia/gpus, as captured."""
    root = tmp_path / 'gpus'
    for i, path in enumerate(capture('information_paths.txt').split()):
        (root / os.path.basename(path)).mkdir(parents=True)
        shutil.copy(os.path.join(CAPTURES, 'information_%d.txt' % i),
                    str(root / os.path.basename(path) / 'information'))
    return str(root)


@pytest.mark.parametrize('text, expected', [
    ('00000000:00:06.0', '0000:00:06.0'),
    ('0000:00:07.0', '0000:00:07.0'),
    ('00000001:A1:0F.7', '0001:a1:0f.7'),
    ('  00000000:18:00.0 ', '0000:18:00.0'),
    ('18:00.0', '0000:18:00.0'),
    ('0000000A:00:06.0', '000a:00:06.0'),  # the domain is hex
    ('00000010:00:06.0', '0010:00:06.0'),
])
def test_bus_id_normalises_the_domain_width_and_case(text, expected):
    assert gm.bus_id(text) == expected


@pytest.mark.parametrize('text', ['', '00:06', '0000:00:06.8', 'GPU-0c10', '000000000:00:06.0', '0000:g0:06.0'])
def test_bus_id_refuses_what_is_not_one(text):
    with pytest.raises(gm.GpuMapError, match=exactly('not a PCI bus id: %r' % text)):
        gm.bus_id(text)


def test_the_real_information_files(proc_root):
    assert gm.read_information(proc_root) == [
        dict(minor=0, uuid=UUID0, bus_id='0000:00:06.0'), dict(minor=1, uuid=UUID1, bus_id='0000:00:07.0')]


def test_the_real_h200_minors_name_the_gpus_nvidia_smi_lists(proc_root):
    assert gm.uuids_of_minors(gm.read_information(proc_root), [1, 0]) == {UUID1: 1, UUID0: 0}
    # the same host's nvidia-smi: index, bus id, UUID (on this host the index is the minor)
    rows = [line.split(', ') for line in capture('query_index_bus_uuid.out').splitlines()]
    assert rows == [['0', '00000000:00:06.0', UUID0], ['1', '00000000:00:07.0', UUID1]]


def test_minor_number_is_no_query_field_on_the_real_driver():
    # why the minor is read from /proc: the capture of asking nvidia-smi for it
    assert capture('query_minor_number_field.out') == 'Field "minor_number" is not a valid field to query.\n\n'


def test_a_host_whose_minors_are_not_its_indexes(tmp_path):
    """Index follows PCI order, the minor the driver's probe order: here they are swapped."""
    root = tmp_path / 'gpus'
    for minor, uuid, location in ((1, UUID0, '0000:00:06.0'), (0, UUID1, '0000:00:07.0')):
        (root / location).mkdir(parents=True)
        (root / location / 'information').write_text(info_text(minor, uuid, location))
    # nvidia-smi lists UUID0 as GPU 0 and UUID1 as GPU 1 (bus order): a container given /dev/nvidia0 owns
    # nvidia-smi's GPU 1, and its gate must watch that GPU, found by UUID
    assert gm.uuids_of_minors(gm.read_information(str(root)), [0]) == {UUID1: 0}


def test_information_that_names_another_bus_than_its_directory(tmp_path):
    root = tmp_path / 'gpus'
    (root / '0000:00:06.0').mkdir(parents=True)
    (root / '0000:00:06.0' / 'information').write_text(info_text(0, UUID0, '0000:00:07.0'))
    path = str(root / '0000:00:06.0' / 'information')
    with pytest.raises(gm.GpuMapError, match=exactly('%s names bus 0000:00:07.0' % path)):
        gm.read_information(str(root))


def test_no_driver(tmp_path):
    absent = str(tmp_path / 'absent')
    with pytest.raises(gm.GpuMapError, match=exactly(
            'cannot list %s (No such file or directory): is the nvidia kernel module loaded?' % absent)):
        gm.read_information(absent)
    (tmp_path / 'gpus' / '0000:00:06.0').mkdir(parents=True)
    info = str(tmp_path / 'gpus' / '0000:00:06.0' / 'information')
    with pytest.raises(gm.GpuMapError, match=exactly('cannot read %s (No such file or directory)' % info)):
        gm.read_information(str(tmp_path / 'gpus'))


@pytest.mark.parametrize('text, says', [
    ('GPU UUID: \t %s\nBus Location: \t 0000:00:06.0\n' % UUID0, "unreadable GPU information ('Device Minor'): %r"),
    ('GPU UUID: \t %s\nBus Location: \t 0000:00:06.0\nDevice Minor: \t x\n' % UUID0,
     "unreadable GPU information (invalid literal for int() with base 10: 'x'): %r"),
])
def test_unreadable_information(text, says):
    with pytest.raises(gm.GpuMapError, match=exactly(says % text)):
        gm.parse_information(text)


def test_unreadable_information_is_quoted_up_to_300_characters():
    text = 'GPU UUID: \t %s\nBus Location: \t 0000:00:06.0\n' % UUID0 + 'Model: x\n' * 60
    with pytest.raises(gm.GpuMapError, match=exactly("unreadable GPU information ('Device Minor'): %r" % text[:300])):
        gm.parse_information(text)


def test_an_information_uuid_or_bus_that_is_not_one():
    with pytest.raises(gm.GpuMapError, match=exactly("unreadable GPU UUID 'GPU-1' in the GPU information")):
        gm.parse_information('GPU UUID: \t GPU-1\nBus Location: \t 0000:00:06.0\nDevice Minor: \t 0\n')
    with pytest.raises(gm.GpuMapError, match=exactly("not a PCI bus id: 'nowhere'")):
        gm.parse_information('GPU UUID: \t %s\nBus Location: \t nowhere\nDevice Minor: \t 0\n' % UUID0)


INFOS = [dict(minor=0, uuid=UUID0, bus_id='0000:00:06.0'), dict(minor=1, uuid=UUID1, bus_id='0000:00:07.0')]


def test_a_minor_no_gpu_has():
    with pytest.raises(gm.GpuMapError, match=exactly('no GPU has device minor 2, 5 (known: 0, 1)')):
        gm.uuids_of_minors(INFOS, [0, 2, 5])


def test_uuids_of_minors_names_each_minors_gpu():
    assert gm.uuids_of_minors(INFOS, [1]) == {UUID1: 1}
    assert gm.uuids_of_minors(INFOS, [1, 0]) == {UUID1: 1, UUID0: 0}
    with pytest.raises(gm.GpuMapError, match=exactly('no GPU has device minor 3 (known: 0, 1)')):
        gm.uuids_of_minors(INFOS, [0, 3])
    for twice in ([INFOS[0], dict(INFOS[1], minor=0)], [INFOS[0], dict(INFOS[1], uuid=UUID0)]):
        with pytest.raises(gm.GpuMapError, match=exactly('the driver lists a GPU UUID or a device minor twice: %r'
                                                         % twice)):
            gm.uuids_of_minors(twice, [0])
