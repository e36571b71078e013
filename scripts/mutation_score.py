"""Scores `mutmut results --all true` per source file for scripts/mutation: killed / (mutants - equivalents),
survivors named with their changed line. Equivalent mutants (a change no test can observe) are listed with a
one-line reason in tests/mutation_equivalents.txt as `<file>::<function> | <the mutated line>  # reason`: by
content, since mutmut numbers mutants by position and an edit elsewhere in the function renumbers them. Floors per
file are the `floor` column of docs/testing.md's score table (the ratchet): exit 1 when a file scores under it.
With MUTATION_SAMPLED=1 (scripts/mutation --sample) only the mutants mutmut ran are scored: the others are
`not checked`, neither killed nor survived."""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EQUIVALENTS = os.path.join(ROOT, "tests", "mutation_equivalents.txt")
TESTING_DOC = os.path.join(ROOT, "docs", "testing.md")


def module_of(collection, path):
    base = path[:-3] if path.endswith(".py") else path
    return (collection + "/" + base).replace("/", ".")


def equivalents():
    """{(file, function, mutated line): reason}"""
    out = {}
    if os.path.exists(EQUIVALENTS):
        with open(EQUIVALENTS, encoding="utf-8") as f:
            for line in f:
                if not line.strip() or line.startswith("#"):
                    continue
                where, _bar, rest = line.partition(" | ")
                code, _hash, reason = rest.rpartition("  # ")
                path, _colons, func = where.strip().partition("::")
                out[(path, func, code.strip())] = reason.strip()
    return out


def function_of(short_name):
    """x_verdict__mutmut_3 -> verdict; xǁReleaseǁrun__mutmut_3 -> Release.run"""
    base = short_name.rsplit("__mutmut_", 1)[0]
    return base[1:].strip("\u01c1").replace("\u01c1", ".") if base.startswith("x\u01c1") else base[2:]


def mutated_line(tree, name):
    """The first added line of `mutmut show NAME`, stripped: what the mutant changed."""
    out = subprocess.run(["mutmut", "show", name], cwd=tree, capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            return line[1:].strip()
    return ""


def floors():
    """{file: floor %} from docs/testing.md rows `| path | ... | floor |`."""
    out = {}
    if os.path.exists(TESTING_DOC):
        with open(TESTING_DOC, encoding="utf-8") as f:
            for m in re.finditer(r"^\| `([^`]+)` \|.*\| (\d+) % \|$", f.read(), re.M):
                out[m.group(1)] = int(m.group(2))
    return out


def main(results_path, collection, seconds, *files):
    tree = os.path.dirname(os.path.abspath(results_path))
    status = {}
    with open(results_path, encoding="utf-8") as f:
        for line in f:
            name, sep, state = line.strip().rpartition(": ")
            if sep:
                status[name] = state
    eq, floor = equivalents(), floors()
    sampled = os.environ.get("MUTATION_SAMPLED", "0") not in ("", "0")
    if sampled:
        status = {n: st for n, st in status.items() if st != "not checked"}
    report, failed = {}, []
    for path in files:
        prefix = module_of(collection, path) + "."
        mine = {n: s for n, s in status.items() if n.startswith(prefix)}
        counted, lines = {}, {}
        for n, st in mine.items():
            if st not in ("killed", "timeout"):
                lines[n] = mutated_line(tree, n)
                if (path, function_of(n[len(prefix):]), lines[n]) in eq:
                    continue
            counted[n] = st
        # a mutant that makes the tests hang is caught too (by the timeout)
        killed = sum(1 for s in counted.values() if s in ("killed", "timeout"))
        survivors = sorted(n[len(prefix):] for n, s in counted.items() if s not in ("killed", "timeout"))
        score = 100.0 * killed / len(counted) if counted else None
        report[path] = dict(mutants=len(mine), equivalent=len(mine) - len(counted), killed=killed,
                            score=None if score is None else round(score, 1), survivors=survivors)
        low = score is not None and path in floor and score < floor[path]
        failed += [path] if low or not mine else []
        print("%-58s %4d mutants %3d equivalent %4d killed  %s%s" % (
            path, len(mine), len(mine) - len(counted), killed, "n/a" if score is None else "%5.1f %%" % score,
            "  UNDER FLOOR %d %%" % floor[path] if low else ("  NO MUTANTS" if not mine else "")))
        for short in survivors:
            print("    %s: %s::%s | %s" % (counted[prefix + short], path, function_of(short), lines[prefix + short]))
    print("MUTATION_SCORE " + json.dumps(dict(seconds=int(seconds), sampled=sampled, files=report), sort_keys=True))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
