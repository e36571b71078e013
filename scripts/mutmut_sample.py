"""mutmut for scripts/mutation --sample: `mutmut run`, with only the sampled mutants written into the mutated files.

The CI sample is every mutant whose number ends in 1 (mutant 1, 11, 21, ... of each function: scripts/mutation).
mutmut itself writes all of a function's mutants (about 9,700 for the safety core) into the mutated copy of its
file and then runs only the sampled ones. The other nine in ten cost CPU without being run: rendering them, and
compiling the files that carry them. The largest, the container helper when it was one script (gpuserve_sglang.py,
before it became the package plugins/module_utils/_helper_*.py), became a module of some 3,200 function copies
that took about 5 s to compile, and it was compiled again each time a test executed it as a program (a script run as
__main__ has no .pyc): every `lock hold` holder a lock test starts, in the stats pass, the clean pass and every lock
mutant.

Here mutmut numbers and generates every mutant as it always does, and its own code builds each function's
trampoline. Only the copies of the mutants outside the sample are dropped from what it writes, with their entries
in the trampoline's table. So the sampled mutants keep their names and their code, and they are run against the same
tests (tests/unit/tooling/test_mutmut_sample.py proves both on real generation). `mutmut show` and the full run
(no --sample) do not use this file.

It reaches into one mutmut function, so it runs only on the version it was checked against (requirements.txt pins
it); any other version stops with a message before anything runs.
Usage (in the staging tree, as mutmut): python3 scripts/mutmut_sample.py run --max-children N '*1'
"""
import multiprocessing
import sys
from importlib.metadata import version

CHECKED_MUTMUT = "3.8.1"


def in_sample(mutant_name):
    """scripts/mutation's sample pattern '*1': the mutant's number ends in 1."""
    return mutant_name.endswith("1")


def sampled_arrangement(arrange):
    """Wrap mutmut's function_trampoline_arrangement(function, mutants, class_name) so that it returns the same
    trampoline and original copy, and of the mutants only those in the sample (their copies and table entries)."""
    def arrangement(function, mutants, class_name):
        declaration, nodes, assignments, names = arrange(function, mutants, class_name)
        # mutmut 3.8.1's layout: nodes = [trampoline, original copy, one copy per mutant, in the order of names];
        # assignments = [the table's '_mutmut_orig' entry, one entry per mutant, same order]
        if len(nodes) != len(names) + 2 or len(assignments) != len(names) + 1:
            raise RuntimeError("mutmut's trampoline layout changed (%d nodes, %d table entries for %d mutants): "
                               "scripts/mutmut_sample.py needs a new check"
                               % (len(nodes), len(assignments), len(names)))
        keep = [i for i, name in enumerate(names) if in_sample(name)]
        return (declaration,
                list(nodes[:2]) + [nodes[2 + i] for i in keep],
                [assignments[0]] + [assignments[1 + i] for i in keep],
                [names[i] for i in keep])
    return arrangement


def install():
    """Patch mutmut's generation in this process (and in the generation pool's forked children)."""
    found = version("mutmut")
    if found != CHECKED_MUTMUT:
        sys.exit("scripts/mutmut_sample.py: mutmut %s is installed; this sampling was checked against mutmut %s "
                 "only. Check mutmut.mutation.file_mutation.function_trampoline_arrangement of %s and "
                 "tests/unit/tooling/test_mutmut_sample.py, then update CHECKED_MUTMUT."
                 % (found, CHECKED_MUTMUT, found))
    from mutmut.mutation import file_mutation  # pylint: disable=import-outside-toplevel
    file_mutation.function_trampoline_arrangement = sampled_arrangement(file_mutation.function_trampoline_arrangement)
    # mutmut generates files in a multiprocessing pool: forked children inherit the patch (spawned ones would not)
    multiprocessing.set_start_method("fork", force=True)


def main():
    install()
    from mutmut.__main__ import cli  # pylint: disable=import-outside-toplevel
    cli()  # pylint: disable=no-value-for-parameter


if __name__ == "__main__":
    main()
