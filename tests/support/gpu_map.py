"""Helpers of the tests of _gpu_map and of the gate's selection by minor: an exact pytest.raises match and a
driver information file (/proc/driver/nvidia/gpus/BUS/information) for a GPU."""
import re


def exactly(text):
    """pytest.raises(match=) searches: the whole message, so a changed word or an added prefix fails."""
    return '^%s$' % re.escape(text)


def info_text(minor, uuid, location):
    return ('Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t %s\nBus Location: \t %s\nDevice Minor: \t %d\n'
            'GPU Excluded:\t No\n' % (uuid, location, minor))
