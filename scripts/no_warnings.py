"""Fails on every Ansible warning in a run's output ([WARNING] or [DEPRECATION WARNING] at a line's start) that is not
listed in ALLOWED with its reason: a clean run prints none, so the one that matters is not lost among others.
scripts/test and scripts/lab-tests run it on the lab deploy's output.

Usage: python3 scripts/no_warnings.py LOG...  (exit 1, printing each one and its line, when one is found)"""
import re
import sys

# (a pattern the warning's first line matches, why it is allowed); empty: none is
ALLOWED = []
WARNING = re.compile(r"^\s*(?:\x1b\[[0-9;]*m)*(\[(?:DEPRECATION )?WARNING\]:.*)$")


def found(text, allowed=ALLOWED):
    """(line number, warning) of every warning in text that no allowed pattern matches."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        match = WARNING.match(line)
        if match and not any(re.search(pattern, match.group(1)) for pattern, _why in allowed):
            out.append((number, re.sub(r"\x1b\[[0-9;]*m", "", match.group(1))))
    return out


def main(paths):
    bad = 0
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, warning in found(handle.read()):
                print("%s:%d: %s" % (path, number, warning))
                bad += 1
    if bad:
        print("no_warnings: %d warning(s) above; fix their cause, or list one in scripts/no_warnings.py ALLOWED with "
              "its reason" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
