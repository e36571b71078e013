"""nvidia-smi as the real H200 answered it (tests/fixtures/nvidia-smi-h200) and a fake nvidia-ml-py; shared by the
tests of _nvidia_smi, of the gate (which reads through it), of _procs (fuser captures) and of gpu_release."""
import os

from ansible_collections.gpuserve.sglang.plugins.module_utils import _nvidia_smi as smi

FIX = os.path.join(os.path.dirname(__file__), '..', 'fixtures', 'nvidia-smi-h200')
UUID = 'GPU-553de4da-dd63-7f3a-8989-418ea85fc9f7'  # the captured H200's


def capture(name):
    def read(ext):
        with open(os.path.join(FIX, name + '.' + ext)) as f:
            return f.read()
    return int(read('rc').strip()), read('out'), read('err')


def four_fields(used):
    """The gate's query, built from the real full capture (index, uuid, name, used, total, ...)."""
    fields = [f.strip() for f in capture('gpu_full_idle')[1].split(',')]
    return '%s, %s, %s, %s\n' % (fields[0], fields[1], used, fields[4])


class Mem:
    def __init__(self, used, total):
        self.used, self.total = used, total


class FakeNvml:
    """The slice of nvidia-ml-py the NVML reader uses; v1 figures differ so a v1 read would show."""

    class NVMLError(Exception):
        pass

    def __init__(self, used_bytes, fail=None, v2=True):
        self.used, self.fail, self.calls = used_bytes, fail, []
        if v2:
            self.nvmlMemory_v2 = 0x02000028

    def nvmlInit(self):
        self.calls.append('init')
        if self.fail == 'init':
            raise self.NVMLError('Driver/library version mismatch')

    def nvmlShutdown(self):
        self.calls.append('shutdown')

    def nvmlDeviceGetCount(self):
        return len(self.used)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetIndex(self, h):
        return h

    def nvmlDeviceGetUUID(self, h):
        return ('GPU-%08d-0000-0000-0000-000000000000' % h).encode()

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        if version is None or version != self.nvmlMemory_v2:
            return Mem(self.used[h] + 615 * smi.MIB, 150754820096)  # v1: reserved included
        return Mem(self.used[h], 150754820096)
