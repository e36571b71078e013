"""Speculative settings SGLang 0.5.23 takes without an error (plugins/module_utils/_speculative.py): a draft that does
not fit its algorithm (refused by the helper's validate-args, tests/unit/plugins/module_utils/test_helper_validate.py)
and the settings that make verification lossy or change the steps at run time (flagged by the audit and the
benchmark). One test per reason, one per pair that must pass."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _speculative as sp

# ------------------------------------------------------------------------------------------------- the draft


@pytest.mark.parametrize("algorithm", ["EAGLE", "eagle", "NEXTN"])
def test_eagle_with_an_eagle3_head_is_refused_naming_both(algorithm):
    assert sp.draft_problem(algorithm, ["LlamaForCausalLMEagle3"], "/models/d") == (
        "speculative_algorithm is %s, but the draft /models/d is an EAGLE-3 head (LlamaForCausalLMEagle3): SGLang "
        "serves that pair without an error at accept length 1.00 (the head gets one hidden state instead of three "
        "and skips its fc layer), so every step pays for a draft that is never accepted. Set "
        "speculative_algorithm: EAGLE3, or use an EAGLE draft" % algorithm)


def test_an_eagle3_head_of_another_family_is_one_too():
    problem = sp.draft_problem("NEXTN", ["Eagle3DeepseekV2ForCausalLM"], "/d")
    assert problem.startswith("speculative_algorithm is NEXTN, but the draft /d is an EAGLE-3 head "
                              "(Eagle3DeepseekV2ForCausalLM)")


@pytest.mark.parametrize("archs", [["LlamaForCausalLMEagle"], ["MistralLarge3ForCausalLMEagle"],
                                   ["LlamaForCausalLM", "Qwen2ForCausalLMEagle"]])
def test_eagle3_with_a_draft_that_is_no_eagle3_head_is_refused_naming_both(archs):
    assert sp.draft_problem("eagle3", archs, "/models/d") == (
        "speculative_algorithm is EAGLE3, but the draft /models/d is %s, not an EAGLE-3 head (such as "
        "LlamaForCausalLMEagle3): SGLang fails with it only at start, after the running server was stopped and the "
        "weights loaded. Use an EAGLE-3 draft, or speculative_algorithm: EAGLE for an EAGLE draft" % ", ".join(archs))


@pytest.mark.parametrize("algorithm, archs", [
    ("EAGLE3", ["LlamaForCausalLMEagle3"]),
    ("EAGLE3", ["Eagle3DeepseekV2ForCausalLM"]),
    ("EAGLE", ["LlamaForCausalLMEagle"]),
    ("EAGLE", ["MistralLarge3ForCausalLMEagle"]),  # the 3 of Large3 is no EAGLE-3
    ("NEXTN", ["DeepseekV3ForCausalLM"]),
    ("NGRAM", ["LlamaForCausalLMEagle3"]),  # not an EAGLE worker: not judged
    ("STANDALONE", ["LlamaForCausalLM"]),
    (None, ["LlamaForCausalLMEagle3"]),
    ("", ["LlamaForCausalLMEagle3"]),
    ("EAGLE", None),  # not read
    ("EAGLE3", []),
])
def test_pairs_sglang_serves_as_meant_or_that_cannot_be_judged_pass(algorithm, archs):
    assert sp.draft_problem(algorithm, archs, "/d") is None


# ------------------------------------------------------------------------------------------------- speculative


@pytest.mark.parametrize("args, runs_a_draft", [
    ({"speculative_algorithm": "EAGLE3"}, True),
    ({"speculative_algorithm": "ngram"}, True),
    ({"speculative_algorithm": "none"}, False),  # SGLang's NONE, in any case
    ({"speculative_algorithm": "NONE"}, False),
    ({"speculative_algorithm": ""}, False),
    ({"speculative_algorithm": None}, False),
    ({}, False),
    (None, False),
])
def test_a_config_runs_a_draft_when_it_names_an_algorithm_other_than_none(args, runs_a_draft):
    assert sp.speculative(args) is runs_a_draft


# ------------------------------------------------------------------------------------------------- lossy settings

EAGLE3 = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3}


def test_an_accept_threshold_single_below_one_is_flagged_as_lossy():
    assert sp.lossy_settings(dict(EAGLE3, speculative_accept_threshold_single=0.8)) == [
        "speculative_accept_threshold_single is 0.8 (below 1.0): verification is lossy, a draft token the target "
        "gives a probability above 0.8 is accepted instead of sampled from the target, so sampled outputs "
        "(temperature > 0) are no longer the target model's; greedy requests are verified exactly"]


def test_an_accept_threshold_acc_below_one_is_flagged_as_lossy():
    assert sp.lossy_settings(dict(EAGLE3, speculative_accept_threshold_acc="0.5")) == [
        "speculative_accept_threshold_acc is 0.5 (below 1.0): verification is lossy, a draft token's accept "
        "probability is raised from p to min(1, p / 0.5), so sampled outputs (temperature > 0) are no longer the "
        "target model's; greedy requests are verified exactly"]


@pytest.mark.parametrize("value", [True, "true", "True", "yes", "on", 1])
def test_adaptive_steps_are_flagged(value):
    assert sp.lossy_settings(dict(EAGLE3, speculative_adaptive=value)) == [
        "speculative_adaptive is on: SGLang changes the number of draft steps at run time from the accept rate, so "
        "speculative_num_steps is where it starts, not what ran, and a measurement holds for the steps it settled "
        "on"]


def test_every_flag_is_named_in_order():
    flags = sp.lossy_settings(dict(EAGLE3, speculative_adaptive=True, speculative_accept_threshold_acc=0.9,
                                   speculative_accept_threshold_single=0.7))
    assert [f.split(" is ")[0] for f in flags] == [
        "speculative_accept_threshold_single", "speculative_accept_threshold_acc", "speculative_adaptive"]


@pytest.mark.parametrize("args", [
    EAGLE3,
    dict(EAGLE3, speculative_accept_threshold_single=1.0, speculative_accept_threshold_acc="1"),  # SGLang's defaults
    dict(EAGLE3, speculative_accept_threshold_single=None, speculative_adaptive=False),
    dict(EAGLE3, speculative_adaptive="false"),
    dict(EAGLE3, speculative_accept_threshold_single=True),  # a flag, not a number: SGLang's parser refuses it
    dict(EAGLE3, speculative_accept_threshold_acc="low"),
    {"speculative_algorithm": None, "speculative_accept_threshold_single": 0.5, "speculative_adaptive": True},
    {"speculative_accept_threshold_acc": 0.5},  # no algorithm: no speculative decoding to make lossy
    None,
])
def test_exact_verification_and_fixed_steps_are_not_flagged(args):
    assert sp.lossy_settings(args) == []
