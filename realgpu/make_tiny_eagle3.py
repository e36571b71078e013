"""Write a small RANDOM Llama target and an EAGLE-3 draft for it, with a local tokenizer (no hub), for the real-SGLang
run on a lent GPU machine (realgpu/real_sglang_h200.sh). The project's research note on SGLang on an H200 (not in this
repository), §5.

  python3 realgpu/make_tiny_eagle3.py OUT   -> OUT/target (LlamaForCausalLM, 4 layers, hidden 256, vocab 512)
                                              OUT/draft  (LlamaForCausalLMEagle3, 1 layer, aux layers [0, 1, 2])

The weights are random (seed 0): the server loads, speculates and serves, but its text is noise and the draft's
acceptance means nothing. Every one of the 512 token ids decodes to text (256 byte tokens, 253 two-byte tokens,
3 specials), so a generation is never empty because the model picked an id the tokenizer lacks.
Needs torch, transformers, safetensors and tokenizers (the machine's own).
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

V, H, I, NH, NKV, L = 512, 256, 512, 4, 2, 4
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"]


def tokenizer():
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())  # the 256 byte-level symbols
    vocab = {c: i for i, c in enumerate(alphabet)}
    letters = [c for c in alphabet if c.isalpha() and c.isascii()]
    pairs = (a + b for a in letters for b in letters)
    while len(vocab) < V - len(SPECIALS):
        vocab[next(pairs)] = len(vocab)  # decodable, never produced by encoding (no merges): fills the vocab
    for s in SPECIALS:
        vocab[s] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=SPECIALS[0], eos_token=SPECIALS[1],
                                   pad_token=SPECIALS[2])
    fast.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                          "{% if add_generation_prompt %}assistant: {% endif %}")
    return fast, vocab


def main(out):
    tgt, drf = os.path.join(out, "target"), os.path.join(out, "draft")
    os.makedirs(tgt, exist_ok=True)
    os.makedirs(drf, exist_ok=True)
    torch.manual_seed(0)
    fast, vocab = tokenizer()
    assert len(fast) == V, len(fast)
    for d in (tgt, drf):
        fast.save_pretrained(d)
    hd = H // NH
    bos, eos = vocab[SPECIALS[0]], vocab[SPECIALS[1]]
    cfg = LlamaConfig(vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=L, num_attention_heads=NH,
                      num_key_value_heads=NKV, head_dim=hd, max_position_embeddings=2048, rms_norm_eps=1e-5,
                      rope_theta=1e4, tie_word_embeddings=False, bos_token_id=bos, eos_token_id=eos,
                      torch_dtype="bfloat16")
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(tgt, safe_serialization=True)
    with open(os.path.join(drf, "config.json"), "w") as f:
        json.dump(dict(architectures=["LlamaForCausalLMEagle3"], model_type="llama", vocab_size=V, draft_vocab_size=V,
                       hidden_size=H, intermediate_size=I, num_hidden_layers=1, num_attention_heads=NH,
                       num_key_value_heads=NKV, head_dim=hd, hidden_act="silu", max_position_embeddings=2048,
                       rms_norm_eps=1e-5, rope_theta=1e4, tie_word_embeddings=False, bos_token_id=bos,
                       eos_token_id=eos, torch_dtype="bfloat16", target_hidden_size=H,
                       # 4 target layers: the default capture [2, L//2, L-3] would collapse; ids 0..2 capture 1..3
                       eagle_config={"eagle_aux_hidden_state_layer_ids": [0, 1, 2], "use_aux_hidden_state": True}),
                  f, indent=2)

    def r(*shape):
        return (torch.randn(*shape) * 0.02).to(torch.bfloat16)

    def one(n):
        return torch.ones(n, dtype=torch.bfloat16)

    p = "layers.0."
    save_file({"fc.weight": r(H, 3 * H), p + "self_attn.q_proj.weight": r(NH * hd, 2 * H),
               p + "self_attn.k_proj.weight": r(NKV * hd, 2 * H), p + "self_attn.v_proj.weight": r(NKV * hd, 2 * H),
               p + "self_attn.o_proj.weight": r(H, NH * hd), p + "mlp.gate_proj.weight": r(I, H),
               p + "mlp.up_proj.weight": r(I, H), p + "mlp.down_proj.weight": r(H, I),
               p + "input_layernorm.weight": one(H), p + "hidden_norm.weight": one(H),
               p + "post_attention_layernorm.weight": one(H), "norm.weight": one(H), "lm_head.weight": r(V, H)},
              os.path.join(drf, "model.safetensors"), metadata={"format": "pt"})
    print(json.dumps({"target": tgt, "draft": drf, "vocab": len(fast),
                      "roundtrip": fast.decode(fast.encode("Hello, EAGLE-3!")),
                      "decodes_all": all(fast.decode([i]) for i in range(V - len(SPECIALS)))}))


if __name__ == "__main__":
    main(sys.argv[1])
