"""scripts/mutmut_sample.py: the sampled generation writes exactly the sampled mutants, with mutmut's own names and
code, and nothing outside the sample; checked on mutmut's real generation of real safety-core files."""
import ast
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import mutmut_sample  # noqa: E402  pylint: disable=wrong-import-position

file_mutation = pytest.importorskip("mutmut.mutation.file_mutation")

# methods (class-name mangling) and functions, up to 116 mutants in one function (numbers past 10 and 100)
FILES = ["plugins/module_utils/_release.py"]


@pytest.fixture(autouse=True)
def mutmut_config(tmp_path, monkeypatch):
    """mutmut reads its configuration (setup.cfg's [mutmut]) from the working directory: an empty one of its own."""
    configuration = pytest.importorskip("mutmut.configuration")
    (tmp_path / "src").mkdir()
    (tmp_path / "setup.cfg").write_text("[mutmut]\nsource_paths =\n    src\n")
    monkeypatch.chdir(tmp_path)
    configuration.reset_config()
    yield
    configuration.reset_config()


def generate(path, arrange):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        source = handle.read()
    original = file_mutation.function_trampoline_arrangement
    file_mutation.function_trampoline_arrangement = arrange
    try:
        return file_mutation.mutate_file_contents(path, source)
    finally:
        file_mutation.function_trampoline_arrangement = original


def functions(code):
    """{name: source} of every function and method the generated module defines."""
    tree = ast.parse(code)
    return {node.name: ast.unparse(node) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def table_entries(code):
    """The trampoline tables' keys: mutants_x_f__mutmut['x_f__mutmut_11'] = ... -> 'x_f__mutmut_11'."""
    tree = ast.parse(code)
    return {node.targets[0].slice.value for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript)
            and isinstance(node.targets[0].value, ast.Name) and node.targets[0].value.id.startswith("mutants_")}


@pytest.mark.parametrize("path", FILES)
def test_the_sample_is_the_full_runs_mutants_ending_in_1_with_the_same_code(path):
    full = generate(path, file_mutation.function_trampoline_arrangement)
    sample = generate(path, mutmut_sample.sampled_arrangement(file_mutation.function_trampoline_arrangement))
    wanted = [name for name in full.mutant_names if name.endswith("1")]
    assert sample.mutant_names == wanted
    assert len(wanted) * 5 < len(full.mutant_names)
    assert any(name.endswith("_11") for name in wanted) and any(name.endswith("_111") for name in wanted)
    full_defs, sample_defs = functions(full.code), functions(sample.code)
    # every mutant in the sample, the trampolines and the original copies: the same code as mutmut writes
    kept = {name for name in full_defs if "__mutmut_" not in name or name.endswith("_orig") or name in wanted}
    assert set(sample_defs) == kept
    assert all(sample_defs[name] == full_defs[name] for name in kept)
    # the tables hold the originals and exactly the sampled mutants
    assert table_entries(sample.code) == {"_mutmut_orig"} | set(wanted)
    assert len(sample.code) * 3 < len(full.code)
    # the function hashes (mutmut's change detection) are those of the source, not of what was written
    assert sample.hash_by_function_name == full.hash_by_function_name


def test_another_trampoline_layout_stops_the_run():
    def arrange(function, mutants, class_name):
        return [], ["trampoline"], ["orig"], ["x_f__mutmut_1"]

    with pytest.raises(RuntimeError, match="layout changed"):
        mutmut_sample.sampled_arrangement(arrange)(None, None, None)


def test_another_mutmut_version_stops_before_anything_runs(monkeypatch):
    monkeypatch.setattr(mutmut_sample, "version", lambda name: "3.9.0")
    monkeypatch.setattr(file_mutation, "function_trampoline_arrangement", "untouched")
    with pytest.raises(SystemExit, match="mutmut 3.9.0 is installed; this sampling was checked against mutmut 3.8.1"):
        mutmut_sample.install()
    assert file_mutation.function_trampoline_arrangement == "untouched"


def test_the_pinned_mutmut_is_the_checked_one():
    with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as handle:
        assert "mutmut==%s\n" % mutmut_sample.CHECKED_MUTMUT in handle.read()
