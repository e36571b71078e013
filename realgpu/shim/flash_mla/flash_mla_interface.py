# GPUSERVE-REALGPU-SHIM (see __init__.py): the one name sglang imports from this module.
class FlashMLASchedMeta:
    pass
