# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_server audit's report: whether what runs is what the inventory asks for, from the verification, the
role's own audit problems, the GPU health drift since the verified start and the speculative flags.

Private to this collection. Used by the filter gpuserve.sglang.sglang_audit (roles/sglang_server/tasks/audit.yml,
printed as the GPUSERVE_AUDIT line). Standard library, _health_drift and _speculative only.
"""
from __future__ import annotations

from ansible_collections.gpuserve.sglang.plugins.module_utils._health_drift import from_manifest
from ansible_collections.gpuserve.sglang.plugins.module_utils._speculative import lossy_settings

NOT_READ = 'GPU health not read: sglang_server_gate_health_enabled is false'


def health(manifest, read, checks=None):
    """The GPU health drift since the verified start; 'not read' (passing, with a note) when the read did not run."""
    if not isinstance(read, dict) or read.get('skipped'):
        return dict(status='not read', ok=True, failed=[], drift=[], unknown=[], items=[], notes=[NOT_READ])
    return from_manifest(manifest, read, checks)


def report(verification, host, problems=(), manifest=None, health_read=None, checks=None, args=None):
    """{host, ok, drift, health, verification, flags}: drift is every problem that fails the audit (the role's, the
    verification's, a GPU health failure); flags the speculative settings that make verification lossy or adaptive,
    which SGLang runs as asked (a flag, not drift)."""
    verification = verification if isinstance(verification, dict) else {}
    found = health(manifest, health_read, checks)
    drift = list(problems or ()) + list(verification.get('problems') or ()) + ['GPU health: %s' % m for m in found['failed']]
    return dict(host=host, ok=not drift, drift=drift, health=found, verification=verification,
                flags=lossy_settings(args or {}))
