"""The speculative_flags filter: audit.yml's view of _speculative.lossy_settings (tested there, one test per
reason), over the effective launch settings."""
from ansible_collections.gpuserve.sglang.plugins.filter.speculative import FilterModule, speculative_flags


def test_registered_as_speculative_flags():
    assert FilterModule().filters() == {'speculative_flags': speculative_flags}


def test_it_names_what_the_verdict_names_and_nothing_for_exact_settings():
    args = {'speculative_algorithm': 'EAGLE3', 'speculative_accept_threshold_single': 0.9, 'speculative_adaptive': True}
    assert [f.split(' is ')[0] for f in speculative_flags(args)] == [
        'speculative_accept_threshold_single', 'speculative_adaptive']
    assert speculative_flags({'speculative_algorithm': 'EAGLE3', 'speculative_accept_threshold_acc': 1.0}) == []
