"""gpu_ownership_conflicts: two containers on one PVE host never own the same GPU."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.filter.gpu_owners import FilterModule, gpu_ownership_conflicts


def hosts(**containers):
    """{name: {gpuserve_pve_host, gpuserve_gpus}} from name=(pve host, minors or None for unset)."""
    out = {}
    for name, (pve, gpus) in containers.items():
        out[name] = {"gpuserve_pve_host": pve}
        if gpus is not None:
            out[name]["gpuserve_gpus"] = gpus
    return out


def conflicts(hv, me):
    return gpu_ownership_conflicts(sorted(hv), hv, me)


def test_disjoint_gpus_on_one_host_and_anything_on_another_host_are_fine():
    hv = hosts(ct101=("pve1", [0, 1, 2, 3]), ct102=("pve1", [4, 5, 6, 7]), ct201=("pve2", None))
    assert [conflicts(hv, me) for me in sorted(hv)] == [[], [], []]
    assert conflicts(hosts(ct101=("pve1", None)), "ct101") == []  # one container owns its whole host


def test_an_overlap_is_named_from_both_sides():
    hv = hosts(ct101=("pve1", [0, 1, 2, 3]), ct102=("pve1", [3, 4, 5]), ct201=("pve2", [3]))
    assert conflicts(hv, "ct101") == ["ct101 and ct102 are on PVE host pve1 and both own device minor(s) [3]"]
    assert conflicts(hv, "ct102") == ["ct102 and ct101 are on PVE host pve1 and both own device minor(s) [3]"]
    assert conflicts(hv, "ct201") == []


@pytest.mark.parametrize("mine, theirs, empty", [(None, [4], "ct101"), ([0], [], "ct102"),
                                                 ([], None, "ct101 and ct102")])
def test_a_container_that_owns_every_gpu_cannot_share_its_host(mine, theirs, empty):
    hv = hosts(ct101=("pve1", mine), ct102=("pve1", theirs))
    assert conflicts(hv, "ct101") == [
        "ct101 and ct102 are on PVE host pve1 and %s own(s) every GPU of it (empty gpuserve_gpus): give each "
        "container its own device minors" % empty]


def test_a_minor_listed_twice():
    assert conflicts(hosts(ct101=("pve1", [0, 1, 1, 0, 2])), "ct101") == [
        "ct101 lists device minor(s) [0, 1] twice in gpuserve_gpus"]


@pytest.mark.parametrize("bad", ["0,1", [0, "1"], [-1], [True], {"0": 1}])
def test_what_is_not_a_list_of_minors_is_refused(bad):
    hv = hosts(ct101=("pve1", [0]), ct102=("pve1", bad))
    with pytest.raises(AnsibleFilterError, match="ct102: gpuserve_gpus must be a list of device minors"):
        conflicts(hv, "ct101")


def test_the_filter_is_registered():
    assert FilterModule().filters() == {"gpu_ownership_conflicts": gpu_ownership_conflicts}
