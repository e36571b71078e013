#!/usr/bin/env python3
"""Builds the lab-only wheel gpuserve_lab_torchvision_ops (GPUSERVE-LAB workaround; see the module's docstring)
into a wheelhouse directory: pure Python, byte-identical on every build (fixed timestamps, sorted entries).

    python3 lab/torchvision_ops/build_wheel.py /var/cache/gpuserve-lab/wheelhouse
"""
import base64
import hashlib
import os
import sys
import zipfile

NAME = "gpuserve_lab_torchvision_ops"
VERSION = "1.0.0"  # bump with any change to the module: the installed version is what sglang_install compares
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = (NAME + ".py", NAME + ".pth")
EPOCH = (2026, 11, 30, 0, 0, 0)


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def build(outdir):
    dist_info = "%s-%s.dist-info" % (NAME, VERSION)
    files = []
    for src in SOURCES:
        with open(os.path.join(HERE, src), "rb") as f:
            files.append((src, f.read()))
    files.append((dist_info + "/METADATA", (
        "Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
        "Summary: GPUSERVE-LAB only: torchvision op schemas for a CPU torch (lab/torchvision_ops)\n" % (
            NAME.replace("_", "-"), VERSION)).encode()))
    files.append((dist_info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: gpuserve-lab\nRoot-Is-Purelib: true\n"
                                        b"Tag: py3-none-any\n"))
    record = "\n".join([_record_line(p, d) for p, d in files] + [dist_info + "/RECORD,,"]) + "\n"
    files.append((dist_info + "/RECORD", record.encode()))
    path = os.path.join(outdir, "%s-%s-py3-none-any.whl" % (NAME, VERSION))
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as whl:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
    os.replace(tmp, path)
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: build_wheel.py WHEELHOUSE_DIR (an existing directory)")
    print(build(sys.argv[1]))
