# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which commit a source tree is at and what is changed in it: the one reader of that fact in the container.

Private to this collection, stdlib only, and it runs nothing itself: each side runs status_argv() its own way and
hands the result to parse_status(). It reaches the container twice: in the payload of sglang_install_info
(_sglang_install; the install runs before the server's helper exists), and as a file of the container helper's
package (`gpuserve-sglang state` and `source`, _helper_state, which the manifest and the benchmark read).

One `git status --porcelain=v2 --branch` gives HEAD and the changes in one consistent look; the changes are
reported as `git status --porcelain` (v1) lines, "XY PATH", which an operator reads at a glance.
"""
from __future__ import annotations


def status_argv(src):
    """The one command. safe.directory=*: the tree belongs to root, but a copy or a restore may own it otherwise,
    and a refusal would read as "not a repository"."""
    return ['git', '-c', 'safe.directory=*', '-C', src, 'status', '--porcelain=v2', '--branch',
            '--untracked-files=all']


def _xy(field):
    """v2 writes an unchanged side as '.', v1 as a space."""
    return field.replace('.', ' ')


def _path(path):
    """v2 C-quotes a name with unusual characters, as v1 does; v1 also quotes a name with a space."""
    return '"%s"' % path if ' ' in path and not path.startswith('"') else path


def _v1_line(line):
    """A porcelain v2 entry as its v1 line; a line of an unknown kind is kept as it is (it still counts)."""
    kind = line[:2]
    if kind == '1 ':  # 1 XY sub mH mI mW hH hI path
        fields = line.split(' ', 8)
        return '%s %s' % (_xy(fields[1]), _path(fields[8])) if len(fields) == 9 else line
    if kind == '2 ':  # 2 XY sub mH mI mW hH hI Xscore path<TAB>origPath
        fields = line.split(' ', 9)
        if len(fields) == 10 and '\t' in fields[9]:
            path, orig = fields[9].split('\t', 1)
            return '%s %s -> %s' % (_xy(fields[1]), _path(orig), _path(path))
        return line
    if kind == 'u ':  # u XY sub m1 m2 m3 mW h1 h2 h3 path
        fields = line.split(' ', 10)
        return '%s %s' % (_xy(fields[1]), _path(fields[10])) if len(fields) == 11 else line
    if kind in ('? ', '! '):
        return '%s %s' % (kind[0] * 2, _path(line[2:]))
    return line


def parse_status(rc, out, err):
    """{rc, error, commit, changes, dirty} from status_argv's result. commit is None when git failed or the
    repository has no commit yet; dirty is None when git failed, else whether any change is listed."""
    lines = out.splitlines() if rc == 0 else []
    heads = [line[len('# branch.oid '):] for line in lines if line.startswith('# branch.oid ')]
    commit = heads[0] if heads and heads[0] != '(initial)' else None
    changes = [_v1_line(line) for line in lines if line and not line.startswith('# ')]
    return {'rc': rc, 'error': err.strip()[-500:], 'commit': commit, 'changes': changes,
            'dirty': bool(changes) if rc == 0 else None}
