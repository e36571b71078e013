# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which container owns which GPUs of its PVE host, checked across the inventory before anything changes.

A container's GPUs are its `gpuserve_gpus`: device minors, the N of /dev/nvidiaN on its PVE host (empty: every
GPU of the host). Two containers on one PVE host must own disjoint, non-empty lists, or the gate of one would
wait on, and a release kill for, the other's GPUs.
"""

from ansible.errors import AnsibleFilterError


def _gpus(name, hostvars):
    value = hostvars[name].get("gpuserve_gpus") or []
    minors = isinstance(value, (list, tuple)) and all(
        isinstance(m, int) and not isinstance(m, bool) and m >= 0 for m in value)
    if not minors:
        raise AnsibleFilterError("%s: gpuserve_gpus must be a list of device minors (the N of /dev/nvidiaN, "
                                 "integers >= 0), got %r" % (name, value))
    return list(value)


def gpu_ownership_conflicts(names, hostvars, me):
    """What is wrong with `me`'s GPUs next to the other containers in `names` ([] when nothing): a minor listed
    twice, or a container on the same PVE host (gpuserve_pve_host) that owns some of the same GPUs."""
    mine = _gpus(me, hostvars)
    problems = []
    twice = sorted(set(m for m in mine if mine.count(m) > 1))
    if twice:
        problems.append("%s lists device minor(s) %s twice in gpuserve_gpus" % (me, twice))
    host = hostvars[me].get("gpuserve_pve_host")
    for other in names:
        if other == me or hostvars[other].get("gpuserve_pve_host") != host:
            continue
        theirs = _gpus(other, hostvars)
        if not mine or not theirs:
            empty = " and ".join(n for n, g in ((me, mine), (other, theirs)) if not g)
            problems.append("%s and %s are on PVE host %s and %s own(s) every GPU of it (empty gpuserve_gpus): "
                            "give each container its own device minors" % (me, other, host, empty))
            continue
        shared = sorted(set(mine) & set(theirs))
        if shared:
            problems.append("%s and %s are on PVE host %s and both own device minor(s) %s"
                            % (me, other, host, shared))
    return problems


class FilterModule:
    def filters(self):
        return {"gpu_ownership_conflicts": gpu_ownership_conflicts}
