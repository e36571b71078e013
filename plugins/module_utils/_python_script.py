# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A module_utils file run as a script by another Python (a venv's): its source, read through its module's loader,
passed to `python -I -c`. The probes are real files, linted and tested as the rest of the code, and they travel as
the code that imports them does (a module's payload, the container helper's package), with no path to find.

Private to this collection. Stdlib only at load (the container helper's package imports it).
"""


def source(module):
    """The text of a module's file, read through its loader: from a checkout, a module's payload zip, or an installed
    package alike (Ansible's collection loader, as ansible-test's units run it, gives bytes)."""
    text = module.__loader__.get_source(module.__name__)
    return text.decode("utf-8") if isinstance(text, bytes) else text


def script_argv(python, module, *args, isolated=True):
    """python runs module's file as its main program, with args; isolated (-I: no user site, no PYTHON* variables)
    unless told otherwise."""
    return [python] + (["-I"] if isolated else []) + ["-c", source(module)] + list(args)
