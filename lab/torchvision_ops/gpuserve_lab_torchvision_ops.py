"""GPUSERVE-LAB workaround (lab container only; never installed on a real host): lets PyPI's torchvision import
beside the lab's CPU torch, so the real `python -m sglang.benchmark.serving` client runs in the lab.

Why: sglang 0.5.23's bench client imports torchvision on every path (docs/benchmark.md, "The client in the lab").
PyPI's torchvision wheels are CUDA builds; their `_C.so` needs libtorch_cuda.so and does not load beside
`torch==2.13.0+cpu`, and then `torchvision/_meta_registrations.py` fails at import with "operator torchvision::nms
does not exist" (it registers fake kernels for nms and qnms unconditionally). No CPU torchvision wheel is reachable
offline here.

What: the `.pth` file next to this module imports it at interpreter start; it only puts a finder on sys.meta_path.
The first `import torchvision` then defines the two operator SCHEMAS (no kernels) that torchvision itself defines
in C++, and nothing else. Calling torchvision.ops.nms still fails (no kernel): the bench client never does.
Nothing happens with a CUDA torch (torchvision's own `_C` defines them there) or when the ops already exist.
"""
import importlib.abc
import sys

# The schemas of torchvision's csrc/ops/nms.cpp (torchvision 0.28): what _meta_registrations.py needs to exist.
SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)

# torch.library.Library drops its registrations when garbage-collected: keep it for the process's lifetime.
_LIBRARY = None


def define_missing_ops():
    """Defines the torchvision op schemas a CPU torch lacks; returns the names it defined."""
    global _LIBRARY
    import torch

    if torch.version.cuda is not None:
        return []
    defined = []
    for schema in SCHEMAS:
        name = schema.split("(", 1)[0]
        try:
            getattr(torch.ops.torchvision, name)
            continue  # defined already (a real CPU torchvision, or a second call)
        except (AttributeError, RuntimeError):
            pass
        if _LIBRARY is None:
            _LIBRARY = torch.library.Library("torchvision", "FRAGMENT")
        _LIBRARY.define(schema)
        defined.append(name)
    return defined


class _BeforeTorchvision(importlib.abc.MetaPathFinder):
    """Runs define_missing_ops() once, just before the first import of torchvision; finds nothing itself."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "torchvision":
            sys.meta_path.remove(self)
            define_missing_ops()
        return None


def install():
    if not any(isinstance(f, _BeforeTorchvision) for f in sys.meta_path):
        sys.meta_path.insert(0, _BeforeTorchvision())


install()
