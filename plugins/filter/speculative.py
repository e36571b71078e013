# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Speculative settings for the audit: those that make verification lossy or change the steps at run time
(_speculative.lossy_settings, which the benchmark's verdict also reads). A flag, not a refusal: SGLang runs them as
asked, and an operator may want them."""

from ansible_collections.gpuserve.sglang.plugins.module_utils._speculative import lossy_settings


def speculative_flags(args):
    """One sentence per lossy or adaptive setting in args (SGLang field names to values)."""
    return lossy_settings(args)


class FilterModule:
    def filters(self):
        return {'speculative_flags': speculative_flags}
