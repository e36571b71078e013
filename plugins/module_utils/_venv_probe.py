# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run in the SGLang venv, isolated (python -I -c, by _sglang_install through _python_script): the sglang distribution,
and whether every package of argv[1] and everything it requires is installed at a version its requirement and the
constraints of argv[2] allow, as pip's resolver sees it. Prints one JSON object.

Private to this collection. A script, not a library: stdlib only (and the venv's pip or packaging, imported when it
runs); sglang_install_info's payload carries it as the module_utils file _sglang_install imports.
"""
import importlib.metadata as md
import json
import re
import sys

# A script another Python runs: its answer is what it prints.
# pylint: disable=ansible-bad-function


def norm(name):
    """A distribution's name as pip compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def main(argv):
    out = {"dist": {}, "intact": {"ok": False, "problems": [], "checked": 0}}
    try:
        d = md.distribution("sglang")
        out["dist"] = {"version": d.version, "direct_url": json.loads(d.read_text("direct_url.json") or "{}")}
    except md.PackageNotFoundError:
        pass
    packages, constraints = json.loads(argv[1]), json.loads(argv[2])
    try:
        from pip._vendor.packaging.requirements import Requirement
        from pip._vendor.packaging.version import Version
    except ImportError:
        try:
            from packaging.requirements import Requirement
            from packaging.version import Version
        except ImportError:
            Requirement = None
    if Requirement is None:
        out["intact"]["problems"].append("neither pip nor packaging is importable in the venv")
    else:
        problems = out["intact"]["problems"]
        pins = {}
        for line in constraints:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                pins.setdefault(norm(req.name), []).append(req)
        todo, seen = [Requirement(p) for p in packages], set()
        while todo:
            req = todo.pop()
            key = (norm(req.name), tuple(sorted(req.extras)))
            if key in seen:
                continue
            seen.add(key)
            try:
                dist = md.distribution(req.name)
            except md.PackageNotFoundError:
                problems.append("%s is not installed" % req)
                continue
            version = Version(dist.version)
            for want in [req] + pins.get(key[0], []):
                if not want.specifier.contains(version, prereleases=True):
                    problems.append("%s %s does not satisfy %s" % (req.name, dist.version, want))
            for line in dist.requires or []:
                sub = Requirement(line)
                if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in [""] + sorted(req.extras)):
                    todo.append(sub)
        out["intact"].update(ok=not problems, checked=len(seen))
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv)
