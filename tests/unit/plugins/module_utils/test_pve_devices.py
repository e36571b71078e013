"""devN parsing, printing, planning and discovery (pure functions of _pve_devices)."""
import os

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _pve_devices as d

GPUS = ['/dev/nvidia%d' % i for i in range(8)] + ['/dev/nvidiactl', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools']
OPTS = {'mode': '0666'}


def test_parse_and_print_round_trip():
    assert d.parse_entry('/dev/nvidia0,mode=0666,gid=44') == ('/dev/nvidia0', {'mode': '0666', 'gid': '44'})
    assert d.parse_entry('path=/dev/nvidia1,mode=666') == ('/dev/nvidia1', {'mode': '0666'})
    assert d.parse_entry('/dev/nvidia2,deny-write=0') == ('/dev/nvidia2', {})
    assert d.print_entry('/dev/nvidia0', {'mode': '0666', 'gid': '44'}) == '/dev/nvidia0,gid=44,mode=0666'


@pytest.mark.parametrize('path', ['nvidia0', '/dev', '/dev/', '/dev/../etc/shadow', '/dev/nvidia0,mode=0777',
                                  '/dev/nv idia', '/var/lib/x/nvidia0', '/dev/./nvidia0', 'dev/nvidia0'])
def test_validate_path_refuses_what_pve_accepts(path):
    with pytest.raises(d.DeviceError, match='under /dev'):
        d.validate_path(path)


def test_options_are_normalised_and_checked():
    assert d.normalise_options(gid=44, mode='666') == {'gid': '44', 'mode': '0666'}
    assert d.normalise_options() == {}
    for bad in (dict(mode='0999'), dict(mode='rw'), dict(gid=-1), dict(uid=-3)):
        with pytest.raises(d.DeviceError):
            d.normalise_options(**bad)


def test_plan_from_nothing_fills_slots_in_order():
    change = d.plan({}, GPUS, OPTS)
    assert change['set']['dev0'] == '/dev/nvidia0,mode=0666'
    assert change['set']['dev10'] == '/dev/nvidia-uvm-tools,mode=0666'
    assert change['delete'] == []
    assert len(change['after']) == 11


def test_plan_is_empty_when_done():
    config = dict(('dev%d' % i, p + ',mode=0666') for i, p in enumerate(GPUS))
    change = d.plan(config, GPUS, OPTS)
    assert change['set'] == {} and change['delete'] == []


def test_plan_keeps_unrelated_entries_and_their_slots():
    config = {'dev0': '/dev/dri/renderD128,gid=104', 'dev2': '/dev/ttyUSB0', 'dev1': '/dev/nvidia0,mode=0666',
              'hostname': 'x'}
    change = d.plan(config, ['/dev/nvidia0', '/dev/nvidia1'], OPTS)
    assert change['set'] == {'dev3': '/dev/nvidia1,mode=0666'}
    assert change['after']['dev0'] == '/dev/dri/renderD128,gid=104'
    assert change['after']['dev2'] == '/dev/ttyUSB0'


def test_plan_updates_options_in_place_and_drops_duplicates():
    config = {'dev0': '/dev/nvidia0', 'dev5': '/dev/nvidia0,mode=0666'}
    change = d.plan(config, ['/dev/nvidia0'], {'gid': '44', 'mode': '0660'})
    assert change['set'] == {'dev0': '/dev/nvidia0,gid=44,mode=0660'}
    assert change['delete'] == ['dev5']


def test_prune_removes_only_gpus_that_left():
    config = {'dev0': '/dev/nvidia0,mode=0666', 'dev1': '/dev/nvidia1,mode=0666', 'dev2': '/dev/ttyUSB0'}
    assert d.plan(config, ['/dev/nvidia0'], OPTS)['delete'] == []
    change = d.plan(config, ['/dev/nvidia0'], OPTS, prune=True)
    assert change['delete'] == ['dev1']
    assert 'dev2' in change['after']


def test_render_sorts_numerically():
    assert d.render({'dev10': 'b', 'dev2': 'a'}) == 'dev2: a\ndev10: b\n'


def test_discover_lab_root_maps_to_dev(tmp_path):
    for name in ['nvidia10', 'nvidia2', 'nvidia0', 'nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools', 'other']:
        (tmp_path / name).write_text('')
    (tmp_path / 'nvidia-caps').mkdir()
    (tmp_path / 'nvidia-caps' / 'nvidia-cap1').write_text('')
    found = d.discover(str(tmp_path))
    assert [os.path.basename(p) for p in found] == ['nvidia0', 'nvidia2', 'nvidia10', 'nvidiactl', 'nvidia-uvm',
                                                    'nvidia-uvm-tools', 'nvidia-cap1']
    assert [d.container_path(p, str(tmp_path)) for p in found][-1] == '/dev/nvidia-caps/nvidia-cap1'


def test_discover_on_dev_wants_character_devices(tmp_path):
    (tmp_path / 'nvidia0').write_text('')
    assert d.discover(str(tmp_path), require_char=True) == []


def test_no_free_slot():
    config = dict(('dev%d' % i, '/dev/x%d' % i) for i in range(d.MAX_DEVICES))
    with pytest.raises(d.DeviceError, match='no free devN slot'):
        d.plan(config, ['/dev/nvidia0'], OPTS)
