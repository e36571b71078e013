"""Scores `mutmut results --all true` per source file for scripts/mutation: killed / (mutants - equivalents),
survivors named. Equivalent mutants (a change no test can observe) are listed with a one-line reason in
tests/mutation_equivalents.txt as `<mutant name>  # reason`. Floors per file are the `floor` column of
docs/testing.md's score table (the ratchet): exit 1 when a file scores under its floor."""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EQUIVALENTS = os.path.join(ROOT, "tests", "mutation_equivalents.txt")
TESTING_DOC = os.path.join(ROOT, "docs", "testing.md")


def module_of(collection, path):
    base = path[:-3] if path.endswith(".py") else path
    return (collection + "/" + base).replace("/", ".")


def equivalents():
    out = {}
    if os.path.exists(EQUIVALENTS):
        with open(EQUIVALENTS, encoding="utf-8") as f:
            for line in f:
                name, _sep, reason = line.partition("#")
                if name.strip():
                    out[name.strip()] = reason.strip()
    return out


def floors():
    """{file: floor %} from docs/testing.md rows `| path | ... | floor |`."""
    out = {}
    if os.path.exists(TESTING_DOC):
        with open(TESTING_DOC, encoding="utf-8") as f:
            for m in re.finditer(r"^\| `([^`]+)` \|.*\| (\d+) % \|$", f.read(), re.M):
                out[m.group(1)] = int(m.group(2))
    return out


def main(results_path, collection, seconds, *files):
    status = {}
    with open(results_path, encoding="utf-8") as f:
        for line in f:
            name, sep, state = line.strip().rpartition(": ")
            if sep:
                status[name] = state
    eq, floor = equivalents(), floors()
    report, failed = {}, []
    for path in files:
        prefix = module_of(collection, path) + "."
        mine = {n: s for n, s in status.items() if n.startswith(prefix)}
        counted = {n: s for n, s in mine.items() if n not in eq}
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
        for s in survivors:
            print("    survived: %s (%s)" % (s, counted[prefix + s]))
    print("MUTATION_SCORE " + json.dumps(dict(seconds=int(seconds), files=report), sort_keys=True))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
