"""Train an EAGLE-3 draft head for a Llama target on the target's own greedy outputs, in the format SGLang 0.5.23's
LlamaForCausalLMEagle3 loads. A small stand-alone trainer: SpecForge (the reference) pins another SGLang, torch and
transformers than the ones that run here, so its install would replace what serves.

  python3 eagle3_draft.py gen   --target DIR --prompts train.jsonl --eval-prompts EVAL.jsonl --data DIR
  python3 eagle3_draft.py train --target DIR --data DIR --out DRAFT_DIR
  python3 eagle3_draft.py names DRAFT_DIR                          (the weight names SGLang's loader will see)

`gen` and `train` run side by side on one GPU: gen writes shards of (prompt + greedy continuation) as it goes, the
eval shard first; train reads every shard there is, and new ones as they come, until its time budget ends (or
--max-steps), then keeps the checkpoint with the best simulated accept length on the eval shard. A run records
its step and sample counts (training.json); --max-samples and --max-steps with those counts repeat it on another
GPU (the prompts' order and the initial weights are seeded; GPU kernels are not bit-exact).

What SGLang's loader and forward expect (sglang/srt/models/llama_eagle3.py, speculative/eagle_worker_v2.py, 0.5.23):
- the target's aux hidden states are the residual stream entering layers [2, L//2, L-3] (its default capture; for
  SmolLM2's 30 layers: 2, 15, 27), concatenated and projected by `fc` (3H -> H);
- one decoder layer: hidden_norm(h) and input_layernorm(embedding of the next token) concatenated (2H) into q/k/v,
  the residual is h; post_attention_layernorm fused with the residual add; the MLP; `norm` on (mlp + residual)
  gives the logits through the TARGET's lm_head and embedding (no `lm_head` or `embed_tokens` saved here,
  `draft_vocab_size: null`: SGLang then takes both from the target), and the pre-norm sum is the hidden state the
  next draft step gets;
- weight names fc.weight, layers.0.{self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj, input_layernorm,
  hidden_norm, post_attention_layernorm}.weight, norm.weight. A name the loader does not know is skipped
  silently, so `names` checks them against the loader's mapping.
Training follows EAGLE-3's training-time test: step k of K feeds the draft its own hidden states from step k-1;
a query at step k sees the step-0 keys of its prefix and its own keys of steps 1..k (a chain of drafts), and its
RoPE position is shifted by k (as SpecForge does). The loss is the cross-entropy against the target's full
distribution, step k weighted 0.8^k, on assistant tokens only.
"""
import argparse
import glob
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

AUX_LAYERS = None  # [2, L//2, L-3], set from the target's config
LAYER_WEIGHTS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                 "mlp.up_proj", "mlp.down_proj", "input_layernorm", "hidden_norm", "post_attention_layernorm")


def log(msg, **kw):
    print(json.dumps(dict(t=round(time.time(), 1), msg=msg, **kw)), flush=True)


def load_target(path, device):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return tok, model


def chat_ids(tok, prompt):
    ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                  tokenize=True, return_dict=True)["input_ids"]
    return list(ids)


# ---------------------------------------------------------------------------------------------------------- gen
@torch.no_grad()
def greedy(model, ids, mask, new_tokens):
    """Greedy continuation of left-padded prompts, new_tokens each; the end-of-turn token does not stop it, as
    SGLang's benchmark client asks (ignore_eos), so the draft learns what the target does past it too."""
    pos = (mask.long().cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1)
    past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1)
    toks, cur = [nxt], pos[:, -1]
    for _ in range(new_tokens - 1):
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], 1)
        cur = cur + 1
        out = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=cur[:, None], past_key_values=past,
                    use_cache=True, logits_to_keep=1)
        past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1)
        toks.append(nxt)
    return torch.stack(toks, 1)


def read_prompts(path):
    with open(path) as f:
        if path.endswith(".json"):  # ShareGPT format: the first user turn
            return [c["conversations"][0]["value"] for c in json.load(f)]
        return [json.loads(line)["prompt"] for line in f if line.strip()]


def cmd_gen(args):
    torch.manual_seed(args.seed)
    dev = args.device
    tok, model = load_target(args.target, dev)
    os.makedirs(args.data, exist_ok=True)
    t0 = time.time()
    eval_prompts = [p for path in args.eval_prompts for p in read_prompts(path)][:args.eval_count]
    train_prompts = read_prompts(args.prompts)
    random.Random(args.seed).shuffle(train_prompts)
    jobs = [("eval", eval_prompts), ("train", train_prompts)]
    shard, total = 0, 0
    for kind, prompts in jobs:
        encoded = [ids for ids in (chat_ids(tok, p) for p in prompts) if len(ids) <= args.max_prompt]
        # batches of similar length (less padding), in windows so the order stays the seeded one
        batches = []
        for w in range(0, len(encoded), args.batch * 8):
            window = sorted(encoded[w:w + args.batch * 8], key=len)
            batches += [window[i:i + args.batch] for i in range(0, len(window), args.batch)]
        made = 0
        for batch in batches:
            if kind == "train" and (time.time() - t0 > args.budget_s or 0 < args.max_samples <= made):
                break
            made += len(batch)
            width = max(len(x) for x in batch)
            pad = tok.pad_token_id if tok.pad_token_id is not None else 0
            ids = torch.tensor([[pad] * (width - len(x)) + x for x in batch], device=dev)
            mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in batch], device=dev)
            out = greedy(model, ids, mask, args.new_tokens).cpu()
            samples = [(torch.tensor(x + out[i].tolist(), dtype=torch.int32), len(x)) for i, x in enumerate(batch)]
            name = os.path.join(args.data, "%s-%05d.pt" % (kind, shard))
            torch.save(samples, name + ".tmp")
            os.replace(name + ".tmp", name)
            shard += 1
            total += len(samples) * args.new_tokens
            log("gen", kind=kind, shard=shard, samples=len(samples), width=width,
                tok_s=round(total / (time.time() - t0)), elapsed=round(time.time() - t0, 1))
    with open(os.path.join(args.data, "DONE"), "w") as f:
        f.write(str(shard))
    log("gen done", shards=shard, new_tokens=total, seconds=round(time.time() - t0, 1))


# -------------------------------------------------------------------------------------------------------- model
class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(n)), eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    a, b = x.chunk(2, -1)
    return torch.cat((-b, a), -1)


class Draft(nn.Module):
    """One EAGLE-3 draft layer, as SGLang 0.5.23's llama_eagle3 computes it (names as its loader reads them)."""

    def __init__(self, cfg):
        super().__init__()
        h, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.nh, self.nkv, self.hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        eps = cfg["rms_norm_eps"]
        self.fc = nn.Linear(3 * h, h, bias=False)
        self.q_proj = nn.Linear(2 * h, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(2 * h, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(2 * h, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=False)
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)
        self.input_layernorm, self.hidden_norm = RMSNorm(h, eps), RMSNorm(h, eps)
        self.post_attention_layernorm, self.norm = RMSNorm(h, eps), RMSNorm(h, eps)
        inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, self.hd, 2).float() / self.hd))
        self.register_buffer("inv_freq", inv, persistent=False)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)

    def rope(self, x, pos):
        f = pos[..., None].float() * self.inv_freq  # B T hd/2
        emb = torch.cat((f, f), -1)[:, None]  # B 1 T hd
        return x * emb.cos().to(x.dtype) + rotate_half(x) * emb.sin().to(x.dtype)

    def step(self, emb, h, pos, cache, causal):
        """One training-time-test step; cache holds (k, v) of the earlier steps. Returns (pre-norm h, normed h)."""
        b, t, _ = h.shape
        residual = h
        x = torch.cat([self.input_layernorm(emb), self.hidden_norm(h)], -1)
        q = self.q_proj(x).view(b, t, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.nkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.nkv, self.hd).transpose(1, 2)
        q, k = self.rope(q, pos), self.rope(k, pos)
        rep = self.nh // self.nkv
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        cache.append((k, v))
        scale = 1.0 / math.sqrt(self.hd)
        k0, v0 = cache[0]
        scores = [(q @ k0.transpose(-1, -2)).float().mul(scale).masked_fill(~causal, float("-inf"))]
        scores += [(q * kj).sum(-1, keepdim=True).float().mul(scale) for kj, _ in cache[1:]]
        probs = torch.softmax(torch.cat(scores, -1), -1).to(q.dtype)
        out = probs[..., :t] @ v0
        for j, (_kj, vj) in enumerate(cache[1:]):
            out = out + probs[..., t + j:t + j + 1] * vj
        out = self.o_proj(out.transpose(1, 2).reshape(b, t, self.nh * self.hd))
        residual = out + residual
        x = self.post_attention_layernorm(residual)
        x = self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        h = x + residual
        return h, self.norm(h)

    def sglang_state_dict(self):
        sd = {"fc.weight": self.fc.weight, "norm.weight": self.norm.weight}
        for name in LAYER_WEIGHTS:
            module = getattr(self, name.split(".")[-1])
            sd["layers.0.%s.weight" % name] = module.weight
        return {k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in sd.items()}


def draft_config(target_cfg):
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": target_cfg.hidden_size,
        "intermediate_size": target_cfg.intermediate_size,
        "num_hidden_layers": 1,
        "num_attention_heads": target_cfg.num_attention_heads,
        "num_key_value_heads": target_cfg.num_key_value_heads,
        "head_dim": target_cfg.hidden_size // target_cfg.num_attention_heads,
        "hidden_act": "silu",
        "max_position_embeddings": target_cfg.max_position_embeddings,
        "rms_norm_eps": target_cfg.rms_norm_eps,
        "rope_theta": (getattr(target_cfg, "rope_parameters", None) or {}).get("rope_theta")
        or getattr(target_cfg, "rope_theta", 10000.0),
        "vocab_size": target_cfg.vocab_size,
        "draft_vocab_size": None,
        "tie_word_embeddings": False,
        "target_hidden_size": target_cfg.hidden_size,
        "bos_token_id": target_cfg.bos_token_id,
        "eos_token_id": target_cfg.eos_token_id,
        "torch_dtype": "bfloat16",
    }


# -------------------------------------------------------------------------------------------------------- train
class Target:
    """The frozen target: aux hidden states (inputs of the capture layers) and the full logits of a batch."""

    def __init__(self, model):
        self.model = model
        n = model.config.num_hidden_layers
        self.layers = [2, n // 2, n - 3]
        self.captured = {}
        for i in self.layers:
            model.model.layers[i].register_forward_pre_hook(self._hook(i), with_kwargs=True)

    def _hook(self, i):
        def hook(_mod, args, kwargs):
            self.captured[i] = args[0] if args else kwargs["hidden_states"]
        return hook

    @torch.no_grad()
    def __call__(self, ids, mask):
        logits = self.model(input_ids=ids, attention_mask=mask).logits
        aux = torch.cat([self.captured[i] for i in self.layers], -1)
        self.captured.clear()
        return aux, logits


def batch_tensors(samples, device):
    """Right-padded ids (B, T), lengths, prompt lengths."""
    width = max(len(s) for s, _ in samples)
    ids = torch.zeros(len(samples), width, dtype=torch.long)
    for i, (s, _) in enumerate(samples):
        ids[i, :len(s)] = s.long()
    lens = torch.tensor([len(s) for s, _ in samples])
    plens = torch.tensor([p for _, p in samples])
    return ids.to(device), lens.to(device), plens.to(device)


def ttt_forward(draft, embed, aux, logits, ids, lens, plens, steps, train=True):
    """Loss and per-step top-1 agreement of the chain. Row t of step k holds the draft's guess for token t+2+k,
    given the target's features at t, the tokens up to t+1+k, and its own hidden states of steps 1..k."""
    b, t = ids.shape
    ar = torch.arange(t, device=ids.device)
    causal = (ar[None, :] <= ar[:, None])[None, None]
    pos = ar[None].expand(b, t)
    h = draft.fc(aux)
    cache, losses, hits = [], [], []
    for k in range(steps):
        src = torch.clamp(ar + 1 + k, max=t - 1)
        emb = embed(ids[:, src])
        h, hn = draft.step(emb, h, pos + k, cache, causal)
        tgt = ar + 2 + k  # the token guessed
        valid = (tgt[None] < lens[:, None]) & (tgt[None] >= plens[:, None])
        rows = valid.nonzero(as_tuple=True)
        if rows[0].numel() == 0:
            hits.append((torch.zeros_like(valid), valid))
            continue
        d_logits = F.linear(hn[rows], embed.weight).float()
        t_logits = logits[rows[0], rows[1] + 1 + k].float()
        hit = torch.zeros(b, t, dtype=torch.bool, device=ids.device)
        hit[rows] = d_logits.argmax(-1) == t_logits.argmax(-1)
        hits.append((hit, valid))
        if train:
            loss = -(torch.softmax(t_logits, -1) * torch.log_softmax(d_logits, -1)).sum(-1).mean()
            losses.append(loss * (0.8 ** k))
    return (sum(losses) if losses else None), hits


def accept_lengths(hits, steps_list=(2, 3)):
    """Simulated accept length at each chain length (greedy, topk 1): 1 + the expected run of correct drafts,
    over the rows where every draft of the longest chain has a target."""
    out = {}
    for steps in steps_list:
        valid = hits[steps - 1][1]
        chain = torch.ones_like(valid)
        total = torch.zeros_like(valid, dtype=torch.float)
        for k in range(steps):
            chain = chain & hits[k][0]
            total = total + chain.float()
        out[steps] = (1.0 + total[valid].mean().item()) if valid.any() else None
    step_acc = [(h[v].float().mean().item() if v.any() else None) for h, v in hits]
    return out, step_acc


def load_shards(data, kind, seen):
    new = []
    for path in sorted(glob.glob(os.path.join(data, "%s-*.pt" % kind))):
        if path not in seen:
            seen.add(path)
            new += torch.load(path)
    return new


def evaluate(draft, embed, target, samples, steps, bs, dev):
    draft.eval()
    agg = {2: [], 3: []}
    accs = [[] for _ in range(steps)]
    with torch.no_grad(), torch.autocast(dev, dtype=torch.bfloat16):
        for i in range(0, len(samples), bs):
            ids, lens, plens = batch_tensors(samples[i:i + bs], dev)
            aux, logits = target(ids, torch.ones_like(ids))
            _, hits = ttt_forward(draft, embed, aux, logits, ids, lens, plens, steps, train=False)
            acc, step_acc = accept_lengths(hits)
            n = int(hits[-1][1].sum())
            for s in agg:
                if acc.get(s) is not None:
                    agg[s].append((acc[s], n))
            for k, a in enumerate(step_acc):
                if a is not None:
                    accs[k].append(a)
    draft.train()
    mean = {s: (sum(a * n for a, n in v) / sum(n for _, n in v) if v else None) for s, v in agg.items()}
    return mean, [sum(a) / len(a) if a else None for a in accs]


def save_draft(draft, target_dir, out, cfg):
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    save_file(draft.sglang_state_dict(), os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"):
        src = os.path.join(target_dir, name)
        if os.path.exists(src):
            with open(src, "rb") as a, open(os.path.join(out, name), "wb") as b:
                b.write(a.read())


def cmd_train(args):
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    dev = args.device
    _tok, model = load_target(args.target, dev)
    target = Target(model)
    embed = model.get_input_embeddings()
    cfg = draft_config(model.config)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:  # early: a preflight can read it
        json.dump(cfg, f, indent=2)
    draft = Draft(cfg).to(dev)
    opt = torch.optim.AdamW(draft.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    seen, pool, evalset = set(), [], []
    t0 = time.time()
    while not evalset:
        evalset = load_shards(args.data, "eval", seen)
        if not evalset:
            time.sleep(2)
    evalset = evalset[:args.eval_count]
    best, history, step, last_eval = None, [], 0, time.time()
    while True:
        elapsed = time.time() - t0
        if elapsed > args.budget_s or 0 < args.max_steps <= step:
            break
        if step % 20 == 0 or not pool:
            pool += load_shards(args.data, "train", seen)
            if not pool:
                time.sleep(2)
                continue
        frac = min(1.0, elapsed / args.budget_s)
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        batch = random.sample(pool, min(args.batch, len(pool)))
        ids, lens, plens = batch_tensors(batch, dev)
        aux, logits = target(ids, torch.ones_like(ids))
        with torch.autocast(dev, dtype=torch.bfloat16):
            loss, hits = ttt_forward(draft, embed, aux, logits, ids, lens, plens, args.steps)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 0.5)
        opt.step()
        step += 1
        if step % 50 == 0:
            acc, step_acc = accept_lengths(hits)
            log("train", step=step, loss=round(loss.item(), 4), lr=round(lr, 6), pool=len(pool),
                train_accept=acc, step_acc=[round(a, 3) if a is not None else None for a in step_acc],
                elapsed=round(elapsed, 1))
        if time.time() - last_eval > args.eval_every_s or time.time() - t0 > args.budget_s:
            last_eval = time.time()
            acc, step_acc = evaluate(draft, embed, target, evalset, args.steps, args.batch, dev)
            history.append({"step": step, "elapsed": round(time.time() - t0, 1), "accept": acc, "step_acc": step_acc,
                            "pool": len(pool)})
            log("eval", **history[-1])
            if best is None or (acc.get(3) or 0) > best["accept"].get(3, 0):
                best = history[-1]
                save_draft(draft, args.target, args.out, cfg)
    acc, step_acc = evaluate(draft, embed, target, evalset, args.steps, args.batch, dev)
    history.append({"step": step, "elapsed": round(time.time() - t0, 1), "accept": acc, "step_acc": step_acc,
                    "pool": len(pool), "final": True})
    if best is None or (acc.get(3) or 0) > best["accept"].get(3, 0):
        best = history[-1]
        save_draft(draft, args.target, args.out, cfg)
    report = {"best": best, "history": history, "steps": step, "samples": len(pool), "eval_samples": len(evalset),
              "seconds": round(time.time() - t0, 1), "args": vars(args)}
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump(report, f, indent=2)
    log("train done", best=best, steps=step, samples=len(pool))


def cmd_names(args):
    """Exit 1 unless every saved weight maps to a parameter of SGLang's LlamaForCausalLMEagle3 (its load_weights:
    q/k/v -> qkv_proj, gate/up -> gate_up_proj, then the name or model.<name>) and every parameter it must load
    (all but embed_tokens and lm_head, which come from the target) is there."""
    from safetensors import safe_open
    with safe_open(os.path.join(args.draft, "model.safetensors"), "pt") as f:
        names = set(f.keys())
    stacked = {".q_proj": ".qkv_proj", ".k_proj": ".qkv_proj", ".v_proj": ".qkv_proj", ".gate_proj": ".gate_up_proj",
               ".up_proj": ".gate_up_proj"}
    params = {"model.fc.weight", "model.norm.weight"} | {
        "model.layers.0.%s.weight" % n for n in ("self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj",
                                                 "mlp.down_proj", "input_layernorm", "hidden_norm",
                                                 "post_attention_layernorm")}
    loaded, unknown = set(), []
    for name in sorted(names):
        mapped = name
        for a, b in stacked.items():
            if a in mapped:
                mapped = mapped.replace(a, b)
                break
        mapped = mapped if mapped in params else "model." + mapped
        (loaded.add(mapped) if mapped in params else unknown.append(name))
    missing = sorted(params - loaded)
    print(json.dumps({"saved": sorted(names), "unknown": unknown, "missing": missing}))
    return 1 if unknown or missing else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--target", required=True)
    g.add_argument("--prompts", required=True)
    g.add_argument("--eval-prompts", nargs="+", required=True)
    g.add_argument("--eval-count", type=int, default=192)
    g.add_argument("--data", required=True)
    g.add_argument("--batch", type=int, default=384)
    g.add_argument("--new-tokens", type=int, default=256)
    g.add_argument("--max-prompt", type=int, default=448)
    g.add_argument("--budget-s", type=float, default=240)
    g.add_argument("--max-samples", type=int, default=0, help="stop after this many training samples (0: the budget)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--device", default="cuda")
    t = sub.add_parser("train")
    t.add_argument("--target", required=True)
    t.add_argument("--data", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--steps", type=int, default=3)
    t.add_argument("--batch", type=int, default=24)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--warmup", type=int, default=100)
    t.add_argument("--budget-s", type=float, default=300)
    t.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: the budget)")
    t.add_argument("--eval-every-s", type=float, default=60)
    t.add_argument("--eval-count", type=int, default=192)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--device", default="cuda")
    n = sub.add_parser("names")
    n.add_argument("draft")
    args = ap.parse_args()
    return {"gen": cmd_gen, "train": cmd_train, "names": cmd_names}[args.cmd](args) or 0


if __name__ == "__main__":
    sys.exit(main())
