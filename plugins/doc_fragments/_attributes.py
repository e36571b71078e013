# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes every module of this collection shares, written once (as community.docker's _attributes): what
each attribute means, and what holds for all of them unless a module says otherwise: POSIX hosts, no diff. A module
adds its own check_mode details (what check mode does there) and, where it returns one, its diff. Private to this
collection."""
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r'''
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff
      mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
'''

    # With DOCUMENTATION: a module that only reads
    INFO_MODULE = r'''
options: {}
attributes:
  check_mode:
    support: full
    details: Read-only, runs in check mode too.
'''
