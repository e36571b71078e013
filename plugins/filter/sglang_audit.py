# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_server audit's report (audit.yml, the GPUSERVE_AUDIT line): _audit.report."""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.module_utils._audit import report
from ansible_collections.gpuserve.sglang.plugins.module_utils._nvidia_smi import SmiError


def sglang_audit(verification, facts):
    """verification: sglang_server_verification; facts: host, problems, manifest, health (the registered health
    read, none when it did not run), checks (sglang_server_gate_health), args (the effective launch args)."""
    facts = facts if isinstance(facts, dict) else {}
    try:
        return report(verification, facts.get('host'), facts.get('problems'), facts.get('manifest'),
                      facts.get('health'), facts.get('checks'), facts.get('args'))
    except SmiError as exc:  # an unknown check or action in checks
        raise AnsibleFilterError('sglang_audit: %s' % exc.msg) from None


class FilterModule:
    def filters(self):
        return {'sglang_audit': sglang_audit}
