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


def test_natural_key_orders_gpus_numerically_then_control_nodes_then_caps_then_the_rest():
    paths = ['/dev/dri/card0', '/dev/nvidia-caps/nvidia-cap10', '/dev/nvidia-modeset', '/dev/nvidia-caps/nvidia-cap2',
             '/dev/nvidia-uvm-tools', '/dev/nvidia-uvm', '/dev/nvidiactl', '/dev/nvidia10', '/dev/nvidia2']
    assert sorted(paths, key=d.natural_key) == [
        '/dev/nvidia2', '/dev/nvidia10', '/dev/nvidiactl', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools',
        '/dev/nvidia-modeset', '/dev/nvidia-caps/nvidia-cap2', '/dev/nvidia-caps/nvidia-cap10', '/dev/dri/card0']
    # bare names (as PVE itself would take them) sort the same way
    assert sorted(['nvidia10', 'nvidiactl', 'nvidia2'], key=d.natural_key) == ['nvidia2', 'nvidia10', 'nvidiactl']


def test_natural_key_does_not_depend_on_the_device_root():
    # the lab's files and /dev sort alike, so discovery and the devN entries agree on the order
    for name in ('nvidia-caps/nvidia-cap3', 'nvidia7', 'nvidia-uvm', 'dri/card0'):
        assert d.natural_key('/var/lib/gpuserve-lab/gpus/' + name) == d.natural_key('/dev/' + name)


def test_discover_defaults_to_dev_and_its_character_devices():
    assert d.discover(patterns=('null',)) == ['/dev/null']


def test_discover_on_dev_skips_regular_files_dirs_and_vanished_nodes(monkeypatch, tmp_path):
    regular = tmp_path / 'nvidia0'
    regular.write_text('')
    gone = str(tmp_path / 'nvidia9')
    seen = []

    def matches(root, pattern):
        seen.append(root)
        return [gone, str(tmp_path), str(regular), '/dev/null']
    monkeypatch.setattr(d, '_pattern_matches', matches)
    assert d.discover('/dev', patterns=('x',)) == ['/dev/null']
    assert d.discover('/dev/', patterns=('x',)) == ['/dev/null']
    # off /dev (the lab) regular files count, directories and vanished paths still do not
    assert d.discover('/var/lib/lab', patterns=('x',)) == sorted([str(regular), '/dev/null'], key=d.natural_key)
    assert seen == ['/dev', '/dev/', '/var/lib/lab']


def test_container_path_keeps_dev_paths_under_another_root():
    assert d.container_path('/dev/nvidia0', '/var/lib/lab') == '/dev/nvidia0'
    assert d.container_path('/var/lib/lab/nvidia-caps/nvidia-cap1', '/var/lib/lab/') == '/dev/nvidia-caps/nvidia-cap1'
    assert d.container_path('/dev//nvidia1') == '/dev/nvidia1'
    with pytest.raises(d.DeviceError, match=r"^device path '/dev' is not"):
        d.container_path('/dev')
    with pytest.raises(d.DeviceError, match=r"'/DEV/nvidia0'"):
        d.container_path('/DEV/nvidia0')


@pytest.mark.parametrize('path', ['/dev/..', '/dev/nvidia-caps/..', '/dev/.', '/dev/nvidia-caps/.'])
def test_validate_path_refuses_dot_components_at_the_end(path):
    with pytest.raises(d.DeviceError, match='under /dev'):
        d.validate_path(path)


def test_validate_path_message_names_the_path():
    with pytest.raises(d.DeviceError) as err:
        d.validate_path('nvidia0')
    assert str(err.value) == "device path 'nvidia0' is not an absolute path under /dev (e.g. /dev/nvidia0)"
    assert d.validate_path('/dev/nvidia-caps/nvidia-cap1') == '/dev/nvidia-caps/nvidia-cap1'


def test_options_accept_root_ids_and_deny_write():
    assert d.normalise_options(gid=0, uid=0) == {'gid': '0', 'uid': '0'}
    assert d.normalise_options(uid=1000, gid='44', mode=660) == {'uid': '1000', 'gid': '44', 'mode': '0660'}
    assert d.normalise_options(deny_write=True) == {'deny-write': '1'}
    assert d.normalise_options(deny_write=False) == {}


@pytest.mark.parametrize('kwargs, message', [
    (dict(gid=-1), 'gid must be >= 0, got -1'),
    (dict(uid=-3), 'uid must be >= 0, got -3'),
    (dict(mode='0999'), "mode must be an octal access mode such as 0666, got '0999'"),
])
def test_option_errors_say_what_is_wrong(kwargs, message):
    with pytest.raises(d.DeviceError) as err:
        d.normalise_options(**kwargs)
    assert str(err.value) == message


def test_parse_entry_edge_cases():
    assert d.parse_entry('/dev/nvidia0,deny-write=false') == ('/dev/nvidia0', {})
    assert d.parse_entry('/dev/nvidia0,deny-write=1') == ('/dev/nvidia0', {'deny-write': '1'})
    # an option value is everything after the first '='
    assert d.parse_entry('/dev/nvidia0,x=a=b') == ('/dev/nvidia0', {'x': 'a=b'})


def test_current_entries_skips_empty_values_and_other_keys():
    config = {'dev0': '', 'dev1': None, 'dev2': '/dev/nvidia0', 'devx': '/dev/nvidia1', 'mp0': '/dev/nvidia2'}
    assert d.current_entries(config) == {2: ('/dev/nvidia0', {})}
    assert d.current_entries(None) == {}


def test_no_free_slot_message():
    config = dict(('dev%d' % i, '/dev/x%d' % i) for i in range(d.MAX_DEVICES))
    with pytest.raises(d.DeviceError) as err:
        d.plan(config, ['/dev/nvidia0'], OPTS)
    assert str(err.value) == 'no free devN slot left for /dev/nvidia0 (PVE allows dev0..dev255)'


def test_prune_deletes_in_numeric_order_and_after_lacks_them():
    config = dict(('dev%d' % i, '/dev/nvidia%d,mode=0666' % i) for i in (0, 2, 3, 10, 11, 20))
    change = d.plan(config, ['/dev/nvidia0'], OPTS, prune=True)
    assert change['delete'] == ['dev2', 'dev3', 'dev10', 'dev11', 'dev20']
    assert change['after'] == {'dev0': '/dev/nvidia0,mode=0666'}
    assert change['set'] == {}


def test_plan_with_a_path_wanted_twice_drops_the_duplicate_entry_once():
    config = {'dev0': '/dev/nvidia0,mode=0666', 'dev3': '/dev/nvidia0,mode=0666'}
    change = d.plan(config, ['/dev/nvidia0', '/dev/nvidia0'], OPTS)
    assert change['delete'] == ['dev3'] and change['set'] == {}
    assert change['after'] == {'dev0': '/dev/nvidia0,mode=0666'}
