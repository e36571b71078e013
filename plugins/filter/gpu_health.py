# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU health drift for audit.yml: the health the deployment manifest recorded at the verified
start against a health read now (gpuserve.sglang.gpu_memory_gate with memory false). The comparison is
_health_drift.from_manifest, which the benchmark's verdict shares. health_checks gives every check of the gate's health
stage (_gpu_health.CHECKS) one action, for the reads that refuse nothing (the audit's, the benchmark's)."""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.module_utils._gpu_health import ACTIONS, CHECKS
from ansible_collections.gpuserve.sglang.plugins.module_utils._nvidia_smi import SmiError
from ansible_collections.gpuserve.sglang.plugins.module_utils._health_drift import from_manifest


def health_drift(manifest, read, checks=None):
    """manifest: the deployment manifest (a dict, or empty when there is none); read: the registered result of the
    health read (its `health`, or its `msg` when it failed); checks: the gate's health option."""
    try:
        return from_manifest(manifest, read, checks)
    except SmiError as exc:  # an unknown check or action in checks
        raise AnsibleFilterError('health_drift: %s' % exc.msg) from None


def health_checks(action):
    """{check: action} for every check _gpu_health knows: a check added there is read by every caller."""
    if action not in ACTIONS:
        raise AnsibleFilterError('health_checks: %r is none of %s' % (action, ', '.join(ACTIONS)))
    return dict((check, action) for check in CHECKS)


class FilterModule:
    def filters(self):
        return {'health_drift': health_drift, 'health_checks': health_checks}
