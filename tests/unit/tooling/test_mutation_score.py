"""scripts/mutation_score.py: how survivors, equivalents and floors turn into a score and an exit code."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import mutation_score as ms  # noqa: E402  pylint: disable=wrong-import-position

C = "ansible_collections/gpuserve/sglang"
M = "ansible_collections.gpuserve.sglang.plugins.filter.f."


@pytest.fixture
def world(tmp_path, monkeypatch):
    """results.txt with 4 mutants of plugins/filter/f.py; `mutmut show` answered from a dict; equivalents and
    the docs table from tmp files."""
    lines = {M + "x_g__mutmut_1": "return a <= b", M + "x_g__mutmut_2": "return None"}
    results = tmp_path / "results.txt"
    results.write_text("    %sx_g__mutmut_1: survived\n    %sx_g__mutmut_2: survived\n"
                       "    %sx_g__mutmut_3: killed\n    %sx_g__mutmut_4: timeout\n" % (M, M, M, M))
    monkeypatch.setattr(ms, "mutated_line", lambda tree, name: lines[name])
    eq, doc = tmp_path / "eq.txt", tmp_path / "testing.md"
    eq.write_text("# comment\nplugins/filter/f.py::g | return a <= b  # a and b are never equal\n")
    monkeypatch.setattr(ms, "EQUIVALENTS", str(eq))
    monkeypatch.setattr(ms, "TESTING_DOC", str(doc))
    return results, doc


def test_equivalents_by_content_leave_the_score_and_timeouts_count_as_killed(world, capsys):
    results, doc = world
    doc.write_text("| `plugins/filter/f.py` | 4 | 1 | 2 | 66.7 % | 50 % | 60 % |\n")
    assert ms.main(str(results), C, "3", "plugins/filter/f.py") == 0
    out = capsys.readouterr().out
    assert "4 mutants   1 equivalent    2 killed   66.7 %" in out
    assert "survived: plugins/filter/f.py::g | return None" in out and "a <= b" not in out


def test_a_file_under_its_floor_or_without_mutants_fails(world, capsys):
    results, doc = world
    doc.write_text("| `plugins/filter/f.py` | 4 | 1 | 2 | 66.7 % | 50 % | 70 % |\n")
    assert ms.main(str(results), C, "3", "plugins/filter/f.py") == 1
    assert "UNDER FLOOR 70 %" in capsys.readouterr().out
    doc.write_text("")
    assert ms.main(str(results), C, "3", "plugins/filter/other.py") == 1
    assert "NO MUTANTS" in capsys.readouterr().out


@pytest.mark.parametrize("short, func", [
    ("x_verdict__mutmut_3", "verdict"),
    ("x__as_env__mutmut_13", "_as_env"),
    ("x\u01c1Release\u01c1run__mutmut_3", "Release.run"),
    ("x\u01c1SmiReader\u01c1__init____mutmut_1", "SmiReader.__init__"),
])
def test_function_of_reads_mutmut_names(short, func):
    assert ms.function_of(short) == func


def test_module_of_maps_paths_with_and_without_py():
    assert ms.module_of(C, "plugins/filter/f.py") == "ansible_collections.gpuserve.sglang.plugins.filter.f"
    assert ms.module_of(C, "roles/x/files/tool") == "ansible_collections.gpuserve.sglang.roles.x.files.tool"


def test_the_docs_table_holds_a_floor_for_every_file_scripts_mutation_scores():
    with open(os.path.join(ROOT, "scripts", "mutation"), encoding="utf-8") as f:
        text = f.read()
    core = text[text.index("SAFETY_CORE=("):text.index(")", text.index("SAFETY_CORE=("))].split()[1:]
    assert core and set(ms.floors()) == set(core)
    assert all(floor >= 90 for floor in ms.floors().values())


def test_a_sample_scores_only_the_mutants_that_ran_and_a_full_run_counts_unrun_ones_as_survivors(
        world, capsys, monkeypatch):
    results, doc = world
    with open(results, "a", encoding="utf-8") as f:
        f.write("    %sx_g__mutmut_5: not checked\n" % M)
    doc.write_text("| `plugins/filter/f.py` | 5 | 1 | 2 | 66.7 % | 50 % | 60 % |\n")
    monkeypatch.setattr(ms, "mutated_line", lambda tree, name: {M + "x_g__mutmut_1": "return a <= b"}.get(name, "x"))
    monkeypatch.setenv("MUTATION_SAMPLED", "1")
    assert ms.main(str(results), C, "3", "plugins/filter/f.py") == 0
    assert "4 mutants   1 equivalent    2 killed   66.7 %" in capsys.readouterr().out
    monkeypatch.setenv("MUTATION_SAMPLED", "0")
    assert ms.main(str(results), C, "3", "plugins/filter/f.py") == 1
    out = capsys.readouterr().out
    assert "5 mutants   1 equivalent    2 killed   50.0 %  UNDER FLOOR 60 %" in out
    assert "not checked: plugins/filter/f.py::g | x" in out
