# GPUSERVE-REALGPU-SHIM: a stand-in for the sgl-flash-mla package, which route C does not carry (realgpu/
# real_sglang_h200.sh copies this folder into the wheels' site). sglang 0.5.23 imports flash_mla only for an
# isinstance check while it captures the EAGLE draft's CUDA graphs (speculative/eagle_worker_v2.py); FlashMLA itself
# never runs here (--attention-backend triton). Any call raises.
def _stub(*_args, **_kwargs):
    raise RuntimeError("flash_mla is a gpuserve realgpu stub: the FlashMLA backend is not available here")


fused_norm_rope_attn_rope_cast = get_mla_metadata = get_mla_decoding_metadata = flash_mla_with_kvcache = _stub
