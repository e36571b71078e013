# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Speculative settings that SGLang 0.5.23 takes without an error and that still defeat the point of a draft.

Private to this collection; stdlib only, part of the container helper's package (_helper_cli.PACKAGE).
- draft_problem: a draft that does not fit the algorithm. The helper's validate-args reads the draft's config.json in
  the container and refuses the pair before anything is stopped (docs/server.md).
- lossy_settings: verification made lossy, or the step count changed at run time. A flag, not a refusal: the audit
  (filter speculative_flags) and the benchmark's verdict name them.
Checked against SGLang 0.5.23's source: models/llama_eagle3.py, speculative/eagle_worker_v2.py, spec_registry.py,
arg_groups/fields/spec.py.
"""

import re

# SGLang's EAGLE-3 draft classes have Eagle3 in their name (0.5.23: LlamaForCausalLMEagle3, Eagle3DeepseekV2ForCausalLM)
EAGLE3_CLASS = re.compile(r"eagle3", re.IGNORECASE)
# --speculative-algorithm names that run SGLang's EAGLE worker for EAGLE-1/2 drafts (NEXTN is an alias of EAGLE)
EAGLE_NAMES = ("EAGLE", "NEXTN")
EAGLE3_NAME = "EAGLE3"


def draft_problem(algorithm, architectures, path):
    """Why the draft at path (its config.json `architectures`) cannot serve under algorithm, or None (no algorithm,
    no architectures, or a pair SGLang serves as meant)."""
    if not algorithm or not architectures:
        return None
    name = str(algorithm).upper()
    eagle3 = any(EAGLE3_CLASS.search(arch) for arch in architectures)
    shown = ", ".join(architectures)
    if name in EAGLE_NAMES and eagle3:
        # EAGLE's target hands the draft one hidden state instead of three, so LlamaForCausalLMEagle3 skips its fc
        # layer: its guesses are never accepted (sglang PR #21272; 0.5.23 does not switch the algorithm itself)
        return ("speculative_algorithm is %s, but the draft %s is an EAGLE-3 head (%s): SGLang serves that pair "
                "without an error at accept length 1.00 (the head gets one hidden state instead of three and skips "
                "its fc layer), so every step pays for a draft that is never accepted. Set speculative_algorithm: "
                "EAGLE3, or use an EAGLE draft" % (algorithm, path, shown))
    if name == EAGLE3_NAME and not eagle3:
        # eagle_worker_v2.init_lm_head reads draft_runner.model.hot_token_id, which only the EAGLE-3 classes define
        return ("speculative_algorithm is EAGLE3, but the draft %s is %s, not an EAGLE-3 head (such as "
                "LlamaForCausalLMEagle3): SGLang fails with it only at start, after the running server was "
                "stopped and the weights loaded. Use an EAGLE-3 draft, or speculative_algorithm: EAGLE for an "
                "EAGLE draft" % (path, shown))
    return None


def speculative(args):
    """Whether a launch config (SGLang field names to values) runs a draft: it names a speculative algorithm other
    than SGLang's NONE."""
    algorithm = (args if isinstance(args, dict) else {}).get("speculative_algorithm")
    return bool(algorithm) and str(algorithm).upper() != "NONE"


def _number(value):
    """value as a float, or None where it is none (SGLang's parser refuses what the argument check sees first)."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _on(value):
    return value is True or str(value).lower() in ("true", "yes", "on", "1")


def lossy_settings(args):
    """The settings in args (SGLang field names to values: sglang_server_args over its base args, or a benchmark
    arm's) that make speculative verification lossy or change its steps at run time, one sentence each: what it
    does and why it matters. [] without a speculative algorithm (then SGLang ignores them)."""
    if not speculative(args):
        return []
    flags = []
    single = _number(args.get("speculative_accept_threshold_single"))
    if single is not None and single < 1.0:
        flags.append("speculative_accept_threshold_single is %g (below 1.0): verification is lossy, a draft token "
                     "the target gives a probability above %g is accepted instead of sampled from the target, so "
                     "sampled outputs (temperature > 0) are no longer the target model's; greedy requests are "
                     "verified exactly" % (single, single))
    acc = _number(args.get("speculative_accept_threshold_acc"))
    if acc is not None and acc < 1.0:
        flags.append("speculative_accept_threshold_acc is %g (below 1.0): verification is lossy, a draft token's "
                     "accept probability is raised from p to min(1, p / %g), so sampled outputs (temperature > 0) "
                     "are no longer the target model's; greedy requests are verified exactly" % (acc, acc))
    if _on(args.get("speculative_adaptive")):
        flags.append("speculative_adaptive is on: SGLang changes the number of draft steps at run time from the "
                     "accept rate, so speculative_num_steps is where it starts, not what ran, and a measurement "
                     "holds for the steps it settled on")
    return flags
