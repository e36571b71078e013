# Copyright: gpuserve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA driver versions and GPU counts for the roles, and whether a container needs the userspace installed; the
driver version itself is read by _nvidia_smi.

Used by the nvidia_userspace role: the container's userspace (libnvidia-ml & co.) must be exactly the host
kernel module's version, or every NVML call fails with "Driver/library version mismatch".
"""

import re

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.module_utils._nvidia_smi import (
    MISMATCH_RE, SmiError, parse_driver_version, parse_nvml_library_version)

_VERSION = r"(\d{3,4}\.\d{1,3}(?:\.\d{1,3})?)"
_LIBNVML = re.compile(r"libnvidia-ml\.so\." + _VERSION + r"$")


def _text(value):
    if isinstance(value, dict):  # a registered command result
        return "\n".join(str(value.get(k) or "") for k in ("stdout", "stderr"))
    if value is None:
        return ""
    return str(value)


def nvidia_driver_version(value, default=None):
    """The driver version in /proc/driver/nvidia/version or an nvidia-smi driver_version query (its text, or its
    registered result), read by _nvidia_smi, the collection's one reader of it.

    Raises with the raw text when nothing parses, unless a default is given.
    """
    text = _text(value)
    try:
        if MISMATCH_RE.search(text):
            raise SmiError("NVIDIA driver/library version mismatch, no usable version in: %r" % text[:400])
        return parse_driver_version(str(value.get("stdout") or "") if isinstance(value, dict) else text)
    except SmiError as exc:
        if default is not None:
            return default
        raise AnsibleFilterError(exc.msg) from None


def nvidia_driver_mismatch(value):
    """True when nvidia-smi/NVML reported a kernel module vs userspace library version mismatch."""
    return bool(MISMATCH_RE.search(_text(value)))


def nvidia_gpu_count(value):
    """GPU count from `nvidia-smi -L` ("GPU 0: ...") or `--query-gpu=driver_version,count --format=csv,noheader`.

    Fails closed on anything else (errors, "No devices were found", mixed output).
    """
    text = _text(value) if not isinstance(value, dict) else str(value.get("stdout") or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise AnsibleFilterError("empty nvidia-smi output: no GPUs visible")
    if len(lines) == 1 and re.match(r"^No devices (were )?found\.?$", lines[0]):
        # driver 580: `nvidia-smi -L` says "No devices found." and exits 0 when no GPU's /dev/nvidiaN is usable
        raise AnsibleFilterError("nvidia-smi lists no GPU (%r): it lists only GPUs whose /dev/nvidiaN it can open; "
                                 "check the container's devN passthrough and `ls -l /dev/nvidia*`" % lines[0])
    listed = [line for line in lines if re.match(r"^GPU \d+: ", line)]
    if listed:
        if len(listed) != len(lines):
            raise AnsibleFilterError("unexpected lines in `nvidia-smi -L` output: %r" % text[:400])
        return len(listed)
    counts = set()
    for line in lines:
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 2 or not re.match("^" + _VERSION + "$", fields[0]) or not fields[1].isdigit():
            raise AnsibleFilterError("cannot count GPUs from line %r in: %r" % (line, text[:400]))
        counts.add(int(fields[1]))
    if len(counts) != 1 or counts.pop() != len(lines):
        raise AnsibleFilterError("GPU count fields disagree with the number of lines in: %r" % text[:400])
    return len(lines)


def nvidia_library_version(paths):
    """Installed userspace version from libnvidia-ml.so.<version> file paths (the .run installer's libraries).

    Returns None when there are none; fails when several versions are installed side by side.
    """
    versions = set()
    for path in paths or []:
        path = path.get("path", "") if isinstance(path, dict) else str(path)
        match = _LIBNVML.search(path)
        if match:
            versions.add(match.group(1))
    if len(versions) > 1:
        raise AnsibleFilterError("several NVIDIA userspace versions installed side by side: %s" % sorted(versions))
    return versions.pop() if versions else None


def nvidia_userspace_plan(host_version, library_version=None, smi=None):
    """What the container needs, from the host driver version and what the container has.

    host_version: the host kernel module version. library_version: from nvidia_library_version (None when no
    .run userspace is installed). smi: the container's registered `nvidia-smi --query-gpu=driver_version,count`
    result (may be None or failed). Returns a dict: install (bool), installed (version or None), mismatch
    (bool), reason (a sentence for the operator).
    """
    host = nvidia_driver_version(host_version) if host_version else None
    if not host:
        raise AnsibleFilterError("host driver version is empty")
    mismatch = nvidia_driver_mismatch(smi) if smi is not None else False
    installed = library_version
    if installed is None and isinstance(smi, dict) and smi.get("rc") == 0:
        installed = nvidia_driver_version(smi, default="") or None
    if installed is None and isinstance(smi, dict) and mismatch:
        installed = parse_nvml_library_version(_text(smi))
    if mismatch:
        reason = "container userspace %s does not match host kernel module %s (Driver/library version mismatch)" % (
            installed or "unknown", host)
        return {"install": True, "installed": installed, "host": host, "mismatch": True, "reason": reason}
    if installed is None:
        return {"install": True, "installed": None, "host": host, "mismatch": False,
                "reason": "no NVIDIA userspace in the container; host kernel module is %s" % host}
    if installed != host:
        return {"install": True, "installed": installed, "host": host, "mismatch": False,
                "reason": "container userspace %s differs from host kernel module %s" % (installed, host)}
    return {"install": False, "installed": installed, "host": host, "mismatch": False,
            "reason": "container userspace %s matches host kernel module" % installed}


class FilterModule:
    def filters(self):
        return {
            "nvidia_driver_version": nvidia_driver_version,
            "nvidia_driver_mismatch": nvidia_driver_mismatch,
            "nvidia_gpu_count": nvidia_gpu_count,
            "nvidia_library_version": nvidia_library_version,
            "nvidia_userspace_plan": nvidia_userspace_plan,
        }
